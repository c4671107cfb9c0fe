//! Option spellings retired from the CLI's one vocabulary (docs/CLI.md, "Shared
//! options"): they stay accepted for one release — hidden from `--help` — and each use
//! prints one deprecation line naming the spelling that replaced it.

/// The deprecation line for `old`, replaced by `new` (which may carry a value).
pub fn warn(old: &str, new: &str) {
    eprintln!("patio: warning: {old} is deprecated and will be removed; use {new}");
}

/// Warns when the command line used the retired long option `old` (a hidden clap
/// alias of `new`: clap itself does not say which spelling matched). Arguments after
/// `--` belong to a command patio runs (`patio trace -- CMD --out x`) and are not looked at.
pub fn warn_if_given(old: &str, new: &str) {
    let given = std::env::args_os()
        .take_while(|arg| arg != "--")
        .any(|arg| {
            arg.to_str().is_some_and(|a| {
                a == old || a.strip_prefix(old).is_some_and(|r| r.starts_with('='))
            })
        });
    if given {
        warn(old, new);
    }
}
