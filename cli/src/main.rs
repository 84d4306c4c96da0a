//! The `zklock` binary: the command of the `zklock_cli` library.

fn main() {
    std::process::exit(zklock_cli::main(std::env::args_os()));
}
