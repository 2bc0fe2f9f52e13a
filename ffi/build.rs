//! Link flags for the shared object.

fn main() {
    // `-z nodelete`: dlclose() never unmaps the library. LuaJIT unloads a library whose clib
    // handle is collected, and a finalizer of a router or context collected in the same cycle
    // would then call into unmapped code; Rust's thread-local destructors have the same hazard.
    // Keeping the code mapped for the life of the process removes both.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
        // The library is installed as libatc_router.so (see the Makefile); programs linked
        // against it should record that name, not the build name libatc_router_ffi.so.
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libatc_router.so");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
