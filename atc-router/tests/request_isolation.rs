//! Request data never changes configuration: a request's field names are looked up, never
//! registered, so no amount of traffic grows the schema, fills its limits or sizes a context;
//! names are registered by the routes that use them and released with the last of them, so
//! route churn on ever-new names runs forever.

use std::sync::Arc;

use atc_router::{Context, IdState, Limits, RouteSpec, Router, Schema, SyncMode, Type, Uuid};

fn schema_with(limits: Limits) -> Arc<Schema> {
    let mut s = Schema::with_limits(limits);
    s.add_field("http.path", Type::String).unwrap();
    s.add_field("http.headers.*", Type::String).unwrap();
    s.add_field("http.queries.*", Type::Int).unwrap();
    Arc::new(s)
}

fn on_header(name: &str) -> String {
    format!(r#"http.path ^= "/" && http.headers.{name} == "yes""#)
}

/// A request carrying `name: yes`.
fn request(schema: &Arc<Schema>, ctx: &mut Context, name: &str) {
    ctx.reset();
    ctx.add_value("http.path", "/x").unwrap();
    ctx.add_value(&format!("http.headers.{name}"), "yes")
        .unwrap();
    assert!(Arc::ptr_eq(ctx.schema(), schema));
}

#[test]
fn a_million_header_names_through_one_context_register_nothing() {
    // The limit is small so that a single registration by a request would show at once.
    let schema = schema_with(Limits {
        max_wildcard_fields: 4,
        ..Limits::default()
    });
    let mut router = Router::new(schema.clone());
    router
        .add(Uuid::from_u128(1), 1, &on_header("x_tenant"))
        .unwrap();
    let mut ctx = Context::new(schema.clone());
    for i in 0..1_000_000 {
        request(&schema, &mut ctx, &format!("h{i}"));
        assert!(!router.execute(&mut ctx));
    }
    assert_eq!(schema.names_in_use(), 1, "only the route's own name");
    // Configuration still works: a route on a name no request could take away.
    router
        .add(Uuid::from_u128(2), 1, &on_header("x_new"))
        .unwrap();
    request(&schema, &mut ctx, "x_new");
    assert!(router.execute(&mut ctx));
    assert_eq!(ctx.result().unwrap().id(), Uuid::from_u128(2));
}

#[test]
fn fresh_contexts_for_new_header_names_register_nothing() {
    let schema = schema_with(Limits {
        max_wildcard_fields: 4,
        ..Limits::default()
    });
    let mut router = Router::new(schema.clone());
    router
        .add(Uuid::from_u128(1), 1, &on_header("x_tenant"))
        .unwrap();
    for i in 0..200_000 {
        let mut ctx = Context::new(schema.clone());
        request(&schema, &mut ctx, &format!("h{i}"));
        assert!(!router.execute(&mut ctx));
    }
    assert_eq!(schema.names_in_use(), 1);
    router
        .add(Uuid::from_u128(2), 1, &on_header("x_new"))
        .unwrap();
    let mut ctx = Context::new(schema.clone());
    request(&schema, &mut ctx, "x_new");
    assert!(router.execute(&mut ctx));
}

#[test]
fn values_of_names_no_route_uses_are_checked_then_ignored() {
    let schema = schema_with(Limits::default());
    let mut ctx = Context::new(schema.clone());
    ctx.add_value("http.headers.nobody_reads", "v").unwrap();
    assert!(ctx.values("http.headers.nobody_reads").is_empty());
    // The wildcard's type still applies, and unknown names are still errors.
    assert!(ctx.add_value("http.queries.page", "not an int").is_err());
    ctx.add_value("http.queries.page", 2).unwrap();
    assert!(ctx.add_value("http.cookies.a", "v").is_err());
    assert_eq!(schema.names_in_use(), 0);
}

#[test]
fn adding_and_removing_200000_routes_on_ever_new_names_runs_forever() {
    // The limit would be reached three times over if names were never released.
    let schema = schema_with(Limits {
        max_wildcard_fields: 65_536,
        ..Limits::default()
    });
    let mut router = Router::new(schema.clone());
    router
        .add(Uuid::from_u128(0), 2, &on_header("steady"))
        .unwrap();
    let mut ctx = Context::new(schema.clone());
    for i in 1..=200_000u128 {
        let name = format!("n{i}");
        router
            .add(Uuid::from_u128(i), 1, &on_header(&name))
            .unwrap();
        if i % 10_007 == 0 {
            request(&schema, &mut ctx, &name);
            assert!(router.execute(&mut ctx), "route {i} matches its own header");
        }
        assert!(router.remove(Uuid::from_u128(i)));
    }
    assert_eq!(schema.names_in_use(), 1);
    request(&schema, &mut ctx, "steady");
    assert!(router.execute(&mut ctx));
}

#[test]
fn a_sync_that_drops_the_last_route_on_a_name_releases_it() {
    let schema = schema_with(Limits::default());
    let mut router = Router::new(schema.clone());
    let (a, b, c) = (on_header("a"), on_header("b"), on_header("c"));
    let spec = |i: u128, e: &'static str| RouteSpec {
        id: Uuid::from_u128(i),
        priority: 1,
        expression: e,
    };
    let (a, b, c): (&'static str, &'static str, &'static str) = (a.leak(), b.leak(), c.leak());
    router
        .sync(&[spec(1, a), spec(2, b)], SyncMode::AllOrNothing)
        .unwrap();
    assert_eq!(schema.names_in_use(), 2);
    router.sync(&[spec(2, b)], SyncMode::AllOrNothing).unwrap();
    assert_eq!(schema.names_in_use(), 1);
    // A refused sync leaves no registration behind.
    let bad = [spec(2, b), spec(3, c), spec(4, "http.path ==")];
    assert!(router.sync(&bad, SyncMode::AllOrNothing).is_err());
    assert_eq!(schema.names_in_use(), 1);
    // Dropping the router releases the rest.
    drop(router);
    assert_eq!(schema.names_in_use(), 0);
}

#[test]
fn a_context_filled_before_its_name_was_released_does_not_read_as_another_field() {
    let schema = schema_with(Limits::default());
    let mut router = Router::new(schema.clone());
    router
        .add(Uuid::from_u128(1), 1, &on_header("old"))
        .unwrap();
    let mut ctx = Context::new(schema.clone());
    request(&schema, &mut ctx, "old");
    let old = schema.lookup("http.headers.old").unwrap();
    // The routes change between filling the context and executing it: the old name's index
    // goes to a new name.
    assert!(router.remove(Uuid::from_u128(1)));
    router
        .add(Uuid::from_u128(2), 1, &on_header("new"))
        .unwrap();
    let new = schema.lookup("http.headers.new").unwrap();
    assert_eq!(old.index(), new.index(), "the index is reused");
    assert_ne!(old, new, "under a new generation");
    assert!(
        !router.execute(&mut ctx),
        "the old name's value is not the new name's"
    );
    assert_eq!(schema.id_state(old), IdState::Released);
    assert!(ctx.values("http.headers.new").is_empty());
    // A value added under the stale id is never read either.
    ctx.add_value_by_id(old, "yes".into()).unwrap();
    assert!(!router.execute(&mut ctx));
    let mut fresh = Context::new(schema.clone());
    fresh.add_value_by_id(old, "yes".into()).unwrap();
    assert_eq!(fresh.id_state(old), IdState::Released);
    request(&schema, &mut ctx, "new");
    assert!(router.execute(&mut ctx));
}

#[test]
fn a_context_sizes_to_the_fields_in_use_not_to_names_ever_seen() {
    let schema = schema_with(Limits::default());
    let mut router = Router::new(schema.clone());
    // Churn moves through many names, but only one is in use at a time: indices are reused
    // lowest first, so a context of the live name stays small.
    for i in 0..10_000u128 {
        router
            .add(Uuid::from_u128(i), 1, &on_header(&format!("n{i}")))
            .unwrap();
        assert!(router.remove(Uuid::from_u128(i)));
    }
    router
        .add(Uuid::from_u128(1 << 40), 1, &on_header("live"))
        .unwrap();
    let id = schema.lookup("http.headers.live").unwrap();
    assert!(id.index() < 8, "index {} after churn", id.index());
}
