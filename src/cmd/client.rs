//! CLIENT subcommands.

use super::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[];
