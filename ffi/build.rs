//! Link flags for the shared object.

fn main() {
    // `-z nodelete`: dlclose() never unmaps the library. LuaJIT unloads a library whose clib
    // handle is collected, and a finalizer of a router or context collected in the same cycle
    // would then call into unmapped code; Rust's thread-local destructors have the same hazard.
    // Keeping the code mapped for the life of the process removes both.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
        // The library is installed as libatc_router.so.<version> with the links
        // libatc_router.so.<major> and libatc_router.so (see the Makefile); programs linked
        // against it record the major version's name, so that an incompatible release (another
        // major) is never loaded in its place, and never the build name libatc_router_ffi.so.
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets it");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libatc_router.so.{major}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
