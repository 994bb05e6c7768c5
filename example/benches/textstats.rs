//! Counts the words of a generated text, then suggests a spelling for each of its
//! misspelled words: about a second of work, most of it edit distances.

use textstats::*;

/// Words in the text, and misspellings looked up (each against the whole vocabulary).
const WORDS: usize = 400_000;
const QUERIES: usize = 400_000;

fn main() {
    let text = sample_text(WORDS);
    let all = words(&text);
    let counts = frequencies(&all);
    let vocabulary: Vec<String> = top(&counts, counts.len()).into_iter().map(|(w, _)| w).collect();
    // Each query a word of the text with two letters swapped.
    let queries: Vec<String> = all
        .iter()
        .take(QUERIES)
        .map(|w| {
            let mut letters: Vec<char> = w.chars().collect();
            letters.swap(0, 1);
            letters.into_iter().collect()
        })
        .collect();
    let suggestions = suggest(&vocabulary, &queries);
    let fixed = suggestions.iter().zip(&all).filter(|(s, w)| s == w).count();
    println!(
        "{} words, {} distinct; {fixed} of {QUERIES} misspellings fixed",
        all.len(),
        counts.len()
    );
}
