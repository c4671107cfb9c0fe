//! What every command's report is made of: plain text tables, numbers in short human
//! forms, JSON and text written to standard output (a reader that went away, as in
//! `patio … | head`, ends the command quietly), and progress bars on stderr (hidden with
//! `--json` and when stderr is not a terminal).

use anyhow::Result;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::time::Duration;

/// A progress bar on stderr, hidden when the output is JSON.
pub fn progress(len: u64, hidden: bool) -> ProgressBar {
    drawn(
        Some(len),
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
        hidden,
    )
}

/// A spinner on stderr for work of unknown length, saying which stage it is in
/// (`set_message`); hidden like [`progress`].
pub fn spinner(hidden: bool) -> ProgressBar {
    drawn(None, "{spinner} [{elapsed_precise}] {msg}", hidden)
}

/// Turns `bar` (a spinner, or hidden) into a bar of `len` bytes: work whose total turned
/// out to be known once it started (the size of the file being read).
pub fn count_bytes(bar: &ProgressBar, len: u64) {
    bar.set_style(style(
        "{spinner} [{elapsed_precise}] {bar:30} {bytes}/{total_bytes} {msg}",
    ));
    bar.set_length(len); // draws the bar in its new style at once
}

/// A bar or spinner drawn on stderr (where indicatif draws nothing unless it is a
/// terminal), ticking on its own; hidden when `hidden`.
fn drawn(len: Option<u64>, template: &str, hidden: bool) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr());
    bar.set_style(style(template));
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).expect("valid template")
}

/// Prints `{"cases": rows}` as pretty JSON on stdout.
pub fn print_json<T: Serialize>(cases: &[T]) -> Result<()> {
    #[derive(Serialize)]
    struct Out<'a, T> {
        cases: &'a [T],
    }
    let text = serde_json::to_string_pretty(&Out { cases })?;
    write_stdout(&format!("{text}\n"))
}

/// Writes `text` to stdout in one go.
/// Standard output that remembers a reader that went away (`patio … | head`): the
/// command then ends quietly instead of reporting the failed write as an error.
pub struct PipeOut {
    inner: std::io::StdoutLock<'static>,
    pub closed: bool,
}

impl PipeOut {
    pub fn new() -> Self {
        PipeOut {
            inner: std::io::stdout().lock(),
            closed: false,
        }
    }

    /// `result` of writing through this output, with a closed pipe counted as success.
    pub fn finish<T, E>(&self, result: std::result::Result<T, E>) -> std::result::Result<(), E> {
        match result {
            Err(_) if self.closed => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

impl std::io::Write for PipeOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        self.closed |= matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe);
        r
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.closed |= matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe);
        r
    }
}

pub fn write_stdout(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// A plain text table: a title, headers, rows; columns are right-aligned except the
/// first and any column listed in `left`.
pub struct Table {
    title: String,
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
    left: Vec<usize>,
    notes: Vec<String>,
}

impl Table {
    pub fn new(title: impl Into<String>, headers: &[&str]) -> Self {
        Table {
            title: title.into(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            left: vec![0],
            notes: Vec::new(),
        }
    }

    /// Left-aligns column `col` (text columns).
    pub fn left_align(mut self, col: usize) -> Self {
        self.left.push(col);
        self
    }

    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len());
        self.rows.push(cells);
    }

    /// A line printed under the table.
    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    pub fn render(&self) -> String {
        let cols = self.headers.len();
        let mut width = vec![0usize; cols];
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            for (w, cell) in width.iter_mut().zip(r) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let parts: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let pad = width[i] - c.chars().count();
                    if self.left.contains(&i) {
                        format!("{c}{}", " ".repeat(pad))
                    } else {
                        format!("{}{c}", " ".repeat(pad))
                    }
                })
                .collect();
            parts.join("  ").trim_end().to_string()
        };
        let total = width.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
        let mut out = String::new();
        out.push_str(&self.title);
        out.push('\n');
        out.push_str(&line(&self.headers));
        out.push('\n');
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        for n in &self.notes {
            out.push_str(n);
            out.push('\n');
        }
        out
    }

    pub fn print(&self) -> Result<()> {
        write_stdout(&self.render())
    }
}

/// Bytes in a short human form: `812 B`, `28.4 KiB`, `61.0 MiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// A ratio or rate with about three significant digits: `37.0`, `1.52`, `12345`.
pub fn sig3(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// A count with thousands separators: `1_000_000` → `1,000,000`.
pub fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_forms() {
        assert_eq!(grouped(1_000_000), "1,000,000");
        assert_eq!(grouped(12), "12");
        assert_eq!(human_bytes(28), "28 B");
        assert_eq!(human_bytes(64_000_000), "61.0 MiB");
        assert_eq!(sig3(1.5234), "1.52");
        assert_eq!(sig3(123.4), "123");
    }
}
