//! `patio completions SHELL` and `patio man -o DIR`: shell completion scripts and man
//! pages generated from the command-line definition itself, so they never drift from
//! what `patio --help` says. (Commands with a Python front end — `layout`, `amr`,
//! `bench layout` — complete and document their first word; their own `--help` has the
//! rest.)

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;
use std::io::Write;
use std::path::PathBuf;

/// `patio completions SHELL`.
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  patio completions bash > ~/.local/share/bash-completion/completions/patio\n  patio completions zsh > ~/.zfunc/_patio      # with fpath+=~/.zfunc before compinit\n  patio completions fish > ~/.config/fish/completions/patio.fish"
)]
pub struct CompletionsArgs {
    /// The shell to write the completion script for.
    #[arg(value_enum)]
    shell: Shell,
}

/// `patio man -o DIR`.
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  patio man -o ~/.local/share/man/man1 && man patio-mount-prefetch"
)]
pub struct ManArgs {
    /// Directory to write the pages into (patio.1, patio-mount.1, patio-mount-prefetch.1, …); created if missing.
    #[arg(short, long = "output", value_name = "DIR")]
    out: PathBuf,
}

/// Writes the completion script for `args.shell` to standard output (built in memory
/// first: the generator panics on a write error such as a closed pipe).
pub fn completions<C: CommandFactory>(args: CompletionsArgs) -> Result<()> {
    let mut cmd = C::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "patio", &mut script);
    std::io::stdout().write_all(&script)?;
    Ok(())
}

/// Writes one man page per command and subcommand into `args.out`.
pub fn man<C: CommandFactory>(args: ManArgs) -> Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    clap_mangen::generate_to(C::command(), &args.out)
        .with_context(|| format!("cannot write man pages into {}", args.out.display()))?;
    let pages = std::fs::read_dir(&args.out)?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "1"))
        .count();
    println!("{pages} man pages in {}", args.out.display());
    Ok(())
}
