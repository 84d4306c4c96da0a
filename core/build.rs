//! Does nothing: it exists so that its build-dependency (see Cargo.toml) takes part in the
//! build, which makes every build of the workspace compile the same procedural macros.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
