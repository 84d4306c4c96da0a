//! What the command's tests share.

use std::process::Command;

/// Runs `zklock COMMAND --zk CONNECT ARGS...` (ZK_CONNECT is not inherited): its exit code,
/// stdout and stderr.
pub fn zklock(command: &str, connect: &str, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_zklock"))
        .arg(command)
        .args(["--zk", connect])
        .args(args)
        .env_remove("ZK_CONNECT")
        .output()
        .expect("run zklock");
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("UTF-8 output");
    (output.status.code().expect("zklock exits, not killed"), text(output.stdout), text(output.stderr))
}
