//! The README's and the book's pages as the tests read them: the command lines they show.

/// The `cargo wasmprof` command lines of a document that a user would type as they are:
/// each line of its code blocks and each inline code span that gives the command more
/// than its name, less a comment and what a pipe or `&&` hands on; not the synopses, whose
/// placeholders (`PROFILE`, `[OPTIONS]`, `...`) a user fills in.
pub fn example_commands(text: &str) -> Vec<String> {
    let re = regex::Regex::new(r"cargo wasmprof [^`\n]*").unwrap();
    let placeholder = regex::Regex::new(r"\[|\.\.\.|\b[A-Z][A-Z0-9_.]{1,}\b").unwrap();
    re.find_iter(text)
        .map(|m| {
            let line = m.as_str();
            let line = line.split(" #").next().unwrap();
            let line = line.split(" | ").next().unwrap();
            line.split(" && ").next().unwrap().trim().to_string()
        })
        .filter(|line| line.split_whitespace().count() > 3 && !placeholder.is_match(line))
        .collect()
}

/// A command line's words, as a shell splits it (quotes kept together, then removed).
pub fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            (_, c) => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}
