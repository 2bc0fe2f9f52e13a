//! The words generated paths are made of.
//!
//! A path prefix in the route language is a string prefix (`^= "/shop"` takes `/shopping`), so
//! the words that can stand at one position are *prefix-free*: no word is a prefix of another.
//! [`WORDS`] fill every position after the first; the first segment comes from one of the root
//! lists, which are prefix-free all together and disjoint from the REST list's roots, so that
//! the families of the mixed table only meet where they are meant to (on shared hosts, ports,
//! methods). The tests check both properties.

/// Words for the second and later segments of a path.
pub(crate) const WORDS: &[&str] = &[
    "accounts",
    "activity",
    "addresses",
    "alerts",
    "archive",
    "articles",
    "audit",
    "backups",
    "badges",
    "banners",
    "brands",
    "budgets",
    "calendar",
    "campaigns",
    "cards",
    "categories",
    "changelog",
    "channels",
    "charts",
    "cities",
    "clients",
    "clusters",
    "comments",
    "config",
    "contacts",
    "content",
    "contracts",
    "coupons",
    "courses",
    "credits",
    "datasets",
    "deals",
    "devices",
    "discounts",
    "documents",
    "domains",
    "drafts",
    "drivers",
    "emails",
    "employees",
    "favorites",
    "feedback",
    "fleet",
    "forms",
    "forums",
    "gallery",
    "geo",
    "groups",
    "health",
    "history",
    "hotels",
    "imports",
    "incidents",
    "items",
    "jobs",
    "keys",
    "labels",
    "leads",
    "lessons",
    "locations",
    "loyalty",
    "maps",
    "members",
    "messages",
    "metrics",
    "models",
    "modules",
    "partners",
    "permissions",
    "photos",
    "pipelines",
    "plans",
    "playlists",
    "policies",
    "portfolio",
    "profiles",
    "promotions",
    "quotes",
    "ratings",
    "receipts",
    "refunds",
    "regions",
    "returns",
    "rewards",
    "roles",
    "routes",
    "schedules",
    "secrets",
    "segments",
    "sessions",
    "settings",
    "shipments",
    "sites",
    "skills",
    "slots",
    "snapshots",
    "stats",
    "streams",
    "suppliers",
    "surveys",
    "tasks",
    "taxes",
    "templates",
    "tickets",
    "tokens",
    "tracks",
    "trips",
    "uploads",
    "vendors",
    "videos",
    "vouchers",
    "wallets",
    "warehouses",
    "webhooks",
    "widgets",
    "workflows",
    "zones",
];

/// First segments of routes on ordinary hosts (host + prefixes, ingress, header-only, wildcard
/// hosts).
pub(crate) const HOSTED_ROOTS: &[&str] = &[
    "api",
    "shop",
    "account",
    "blog",
    "docs",
    "help",
    "news",
    "support",
    "dashboard",
    "auth",
    "web",
    "portal",
    "store",
    "cart",
    "admin",
    "status",
    "graphql",
    "console",
];

/// First segments of the tenant-header family's services.
pub(crate) const TENANT_ROOTS: &[&str] = &[
    "orders",
    "billing",
    "invoices",
    "customers",
    "subscriptions",
    "usage",
    "quotas",
    "workspaces",
    "projects",
    "files",
];

/// First segments of method-split routes (no host).
pub(crate) const METHOD_ROOTS: &[&str] = &[
    "catalog",
    "products",
    "inventory",
    "checkout",
    "bookings",
    "listings",
    "reservations",
    "offers",
    "prices",
    "reviews",
    "wishlists",
];

/// First segments of ingress rules without a host.
pub(crate) const INGRESS_ROOTS: &[&str] = &["apps", "services", "frontends", "backends"];

/// First segments of routes on a shared port.
pub(crate) const PORT_ROOTS: &[&str] = &["payments", "payouts", "ledger", "settlements"];

/// First segments of routes on a shared TLS SNI.
pub(crate) const SNI_ROOTS: &[&str] = &["vault", "secure", "certs"];

/// First segments of routes for a source network.
pub(crate) const SOURCE_ROOTS: &[&str] = &["internal", "ops", "infra", "monitoring"];

/// First segments of the other-operators family.
pub(crate) const OTHER_ROOTS: &[&str] = &["reports", "exports", "analytics", "insights", "logs"];

/// First segments of path-only routes.
pub(crate) const PATH_ROOTS: &[&str] = &["static", "assets", "public", "cdn", "downloads", "media"];

/// First segments of paths no route takes (miss-keys requests).
pub(crate) const MISS_ROOTS: &[&str] = &["legacy", "deprecated", "old", "beta", "unknown"];

/// The word a `!(http.path ^= …)` route excludes below its prefix; never in [`WORDS`], so
/// requests built for the route never fall into the excluded part.
pub(crate) const EXCLUDED: &str = "private";

/// Every root list (the REST roots aside), for the prefix-free check.
#[cfg(test)]
pub(crate) const ALL_ROOTS: &[&[&str]] = &[
    HOSTED_ROOTS,
    TENANT_ROOTS,
    METHOD_ROOTS,
    INGRESS_ROOTS,
    PORT_ROOTS,
    SNI_ROOTS,
    SOURCE_ROOTS,
    OTHER_ROOTS,
    PATH_ROOTS,
    MISS_ROOTS,
];

/// Values of untyped REST parameters (owners, repositories, user names...), none of them a
/// static segment of the REST list.
pub(crate) const NAMES: &[&str] = &[
    "octocat",
    "hubot",
    "monalisa",
    "acme",
    "contoso",
    "initech",
    "globex",
    "umbrella",
    "tyrell",
    "wayne",
    "stark",
    "hooli",
    "piedpiper",
    "aperture",
    "cyberdyne",
    "soylent",
];
