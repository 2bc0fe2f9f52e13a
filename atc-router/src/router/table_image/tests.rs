//! Unit tests of `table_image.rs`: an image opened beside the one in force shares the regexes
//! it already compiled. Kept apart so that the reader's code stays within the 700 lines a core
//! file may have; they read its private parts (`super::*`).

use super::*;
use crate::value::Type;

fn image_of(router: &Router) -> ImageRouter {
    let mut schema = Schema::new();
    schema.add_field("http.path", Type::String).unwrap();
    ImageRouter::from_bytes(Arc::new(schema), router.to_image().unwrap()).unwrap()
}

/// The next version of a table, opened while the version in force is, takes the regexes the
/// version in force compiled (the very same), and compiles only those it adds.
#[test]
fn an_image_opened_beside_another_compiles_only_the_regexes_it_adds() {
    let mut schema = Schema::new();
    schema.add_field("http.path", Type::String).unwrap();
    let mut router = Router::new(Arc::new(schema));
    for i in 0..50u128 {
        let expression = format!(r#"http.path ~ "^/carry/{i}/(?<id>\\d+)$""#);
        router
            .add(uuid::Uuid::from_u128(i + 1), 1, &expression)
            .unwrap();
    }
    let first = image_of(&router);
    assert_eq!(first.compile_regexes(), 50);
    router
        .add(
            uuid::Uuid::from_u128(1000),
            1,
            r#"http.path ~ "^/carry/new/(\\w+)$""#,
        )
        .unwrap();
    let next = image_of(&router);
    assert_eq!(next.regexes(), (51, 0));
    assert_eq!(
        next.reuse_regexes(),
        50,
        "the new regex is not compiled by a reuse"
    );
    assert_eq!(next.compile_regexes(), 51);
    let old = first.opened.borrow_owner().regexes.all_compiled();
    let new = next.opened.borrow_owner().regexes.all_compiled();
    let taken = new
        .iter()
        .filter(|n| old.iter().any(|o| Arc::ptr_eq(n, o)))
        .count();
    assert_eq!(
        taken, 50,
        "all but the new regex come from the table in force"
    );
    // Once the table in force is gone, its regexes live on in the next one.
    drop(first);
    let mut ctx = Context::new(next.schema().clone());
    ctx.add_value("http.path", "/carry/7/42").unwrap();
    assert!(next.execute(&mut ctx));
    assert_eq!(ctx.result().unwrap().id(), uuid::Uuid::from_u128(8));
}
