//! The meta's call sites, and how its JSON holds them compactly: a module's thousands of
//! sites name a few hundred source files, whose paths written out at every site were two
//! thirds of a debug test binary's meta, read on every run.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::symbols::SourcePos;

/// One call site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteMeta {
    /// Function id of the function that holds the call.
    pub caller: u32,
    /// Function id of the callee, for direct calls.
    pub callee: Option<u32>,
    /// Source position of the call, when DWARF says.
    pub pos: Option<SourcePos>,
}

/// A list of sites in JSON: `{"files": [...], "sites": [[caller, callee, file, line], ...]}`,
/// each file named once, `file` its index in `files`; `callee` null for an indirect call,
/// `file` and `line` null where DWARF says nothing.
pub(super) mod compact {
    use super::*;

    /// One site's row: caller, callee, file index, line.
    type Row = (u32, Option<u32>, Option<u32>, Option<u32>);

    /// The sites' JSON form.
    #[derive(Serialize, Deserialize)]
    struct Compact<'a> {
        #[serde(borrow)]
        files: Vec<std::borrow::Cow<'a, str>>,
        sites: Vec<Row>,
    }

    /// Writes `sites` in the compact form.
    pub(in crate::meta) fn serialize<S: serde::Serializer>(
        sites: &[SiteMeta],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut files: Vec<std::borrow::Cow<str>> = Vec::new();
        let mut index: HashMap<&str, u32> = HashMap::new();
        let sites = sites
            .iter()
            .map(|site| {
                let (file, line) = site
                    .pos
                    .as_ref()
                    .map(|pos| {
                        let next = files.len() as u32;
                        let file = *index.entry(pos.file.as_str()).or_insert_with(|| {
                            files.push(pos.file.as_str().into());
                            next
                        });
                        (file, pos.line)
                    })
                    .unzip();
                (site.caller, site.callee, file, line)
            })
            .collect();
        Compact { files, sites }.serialize(serializer)
    }

    /// Reads sites written in the compact form.
    pub(in crate::meta) fn deserialize<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<SiteMeta>, D::Error> {
        let Compact { files, sites } = Compact::deserialize(deserializer)?;
        sites
            .into_iter()
            .map(|(caller, callee, file, line)| {
                let pos = match (file, line) {
                    (Some(file), Some(line)) => {
                        let file = files.get(file as usize).ok_or_else(|| {
                            serde::de::Error::custom(format!(
                                "a call site names file {file} of {}",
                                files.len()
                            ))
                        })?;
                        Some(SourcePos {
                            file: file.to_string(),
                            line,
                        })
                    }
                    _ => None,
                };
                Ok(SiteMeta {
                    caller,
                    callee,
                    pos,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sites with and without callees and positions, two in one file, come back as they
    /// were, each file written once.
    #[test]
    fn sites_come_back_from_their_compact_form() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Holder {
            #[serde(with = "compact")]
            sites: Vec<SiteMeta>,
        }
        let pos = |file: &str, line| {
            Some(SourcePos {
                file: file.into(),
                line,
            })
        };
        let holder = Holder {
            sites: vec![
                SiteMeta {
                    caller: 1,
                    callee: Some(2),
                    pos: pos("src/a \"x\".rs", 10),
                },
                SiteMeta {
                    caller: 1,
                    callee: None,
                    pos: None,
                },
                SiteMeta {
                    caller: 3,
                    callee: Some(1),
                    pos: pos("src/b.rs", 7),
                },
                SiteMeta {
                    caller: 4,
                    callee: None,
                    pos: pos("src/a \"x\".rs", 12),
                },
            ],
        };
        let json = serde_json::to_string(&holder).unwrap();
        assert_eq!(
            json,
            r#"{"sites":{"files":["src/a \"x\".rs","src/b.rs"],"sites":[[1,2,0,10],[1,null,null,null],[3,1,1,7],[4,null,0,12]]}}"#
        );
        assert_eq!(serde_json::from_str::<Holder>(&json).unwrap(), holder);
        let bad = r#"{"sites":{"files":["a.rs"],"sites":[[1,2,1,10]]}}"#;
        let error = serde_json::from_str::<Holder>(bad).unwrap_err().to_string();
        assert!(error.contains("a call site names file 1 of 1"), "{error}");
    }
}
