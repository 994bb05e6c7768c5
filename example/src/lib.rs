//! Word statistics and spelling suggestions: the example that cargo-wasmprof's README
//! profiles. Every count the profile shows follows from the code: [`suggest`] calls
//! [`distance`] once per query and word of the vocabulary.

use std::collections::HashMap;

/// The lowercase words of `text` (runs of ASCII letters).
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// How often each word occurs.
pub fn frequencies(words: &[String]) -> HashMap<String, u32> {
    let mut counts = HashMap::new();
    for word in words {
        *counts.entry(word.clone()).or_insert(0) += 1;
    }
    counts
}

/// The `n` most frequent words, most frequent first (ties in alphabetical order).
pub fn top(counts: &HashMap<String, u32>, n: usize) -> Vec<(String, u32)> {
    let mut all: Vec<(String, u32)> = counts.iter().map(|(w, &c)| (w.clone(), c)).collect();
    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    all.truncate(n);
    all
}

/// The edit distance between `a` and `b` (insertions, deletions, substitutions).
#[inline(never)]
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// For each query, the word of `vocabulary` closest to it (the first of those as close).
#[inline(never)]
pub fn suggest(vocabulary: &[String], queries: &[String]) -> Vec<String> {
    queries
        .iter()
        .map(|query| {
            vocabulary
                .iter()
                .min_by_key(|word| distance(query, word))
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

/// A text of `n` words drawn from a fixed list by a linear congruential generator: the
/// same text on every run.
pub fn sample_text(n: usize) -> String {
    const LIST: [&str; 24] = [
        "profile", "sample", "count", "call", "arc", "function", "module", "memory",
        "stack", "frame", "thread", "time", "line", "source", "report", "graph", "flame",
        "cost", "test", "bench", "build", "cargo", "wasm", "host",
    ];
    let mut state: u64 = 0x2545_f491;
    let mut text = String::with_capacity(n * 7);
    for _ in 0..n {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        text.push_str(LIST[(state >> 33) as usize % LIST.len()]);
        text.push(' ');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_words() {
        let counts = frequencies(&words("a b, A c! b a"));
        assert_eq!(counts["a"], 3);
        assert_eq!(counts["b"], 2);
        assert_eq!(top(&counts, 1), [("a".to_string(), 3)]);
    }

    #[test]
    fn measures_edit_distance() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("flame", "flame"), 0);
    }

    #[test]
    fn suggests_the_closest_word() {
        let vocabulary = words("profile sample stack");
        let queries = vec!["stakc".to_string(), "profiel".to_string()];
        assert_eq!(suggest(&vocabulary, &queries), ["stack", "profile"]);
    }

    #[test]
    fn counts_a_sample_text() {
        let text = sample_text(20_000);
        let counts = frequencies(&words(&text));
        assert_eq!(counts.values().sum::<u32>(), 20_000);
        assert_eq!(counts.len(), 24);
    }
}
