//! Reading a file (or standard input for `-`) and telling JSON from line-based text.

use std::io::Read;
use std::path::Path;

/// The bytes of `path`, or of standard input for `-`.
pub fn read(path: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    if path == "-" {
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
    } else {
        bytes = std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    }
    // A byte-order mark some editors write is not part of the content.
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        bytes.drain(..3);
    }
    Ok(bytes)
}

/// Whether a file is JSON: by its extension (`.json`, or `.tsv`/`.txt` for text), else by
/// its first non-blank character (`[` or `{`).
pub fn is_json(path: &str, content: &str) -> bool {
    let ext = Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("json") => true,
        Some("tsv" | "txt") => false,
        _ => matches!(content.trim_start().chars().next(), Some('[' | '{')),
    }
}
