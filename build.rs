//! Links the `diamond` binary as a position-dependent executable (`-no-pie`)
//! on x86-64 GNU/Linux. As a PIE, the loader applied ~74k relative relocations at
//! every start: it read 1.8 MB of `.rela.dyn` and wrote 1 MB of
//! `.data.rel.ro` (vtables, the operator table's strings), pages that stay
//! resident for the whole process. A fixed-address image needs none of that
//! (the trade: the executable's own image is not placed at a random address;
//! the libraries, heap and stack still are).

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && arch == "x86_64" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
