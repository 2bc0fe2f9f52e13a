//! The resource list the `rest-api` family is made of: a public REST API of the kind gateways
//! front (repositories, issues, pull requests, users, organisations, gists, search), written
//! for this crate, one line per method and path.
//!
//! A path is static segments and `{name}` or `{name:kind}` parameters (kind `int`: digits, `hex`:
//! lowercase hex digits, none: any non-empty segment). Two rules keep every request reaching its
//! own route, whatever the priorities: a parameter never stands beside a static segment that it
//! could also match (`/releases/latest` beside `/releases/{release_id:int}` is fine, an untyped
//! parameter there would not be), and parameters at one position under one static prefix share
//! their name (path routers such as matchit refuse two names there). The tests check both.

/// `(methods, path)`: each method is a route of its own.
pub(crate) const ENDPOINTS: &[(&str, &str)] = &[
    // repositories
    ("GET PATCH DELETE", "/repos/{owner}/{repo}"),
    ("GET", "/repos/{owner}/{repo}/contributors"),
    ("GET", "/repos/{owner}/{repo}/languages"),
    ("GET", "/repos/{owner}/{repo}/tags"),
    ("GET", "/repos/{owner}/{repo}/topics"),
    ("GET", "/repos/{owner}/{repo}/forks"),
    ("GET", "/repos/{owner}/{repo}/stargazers"),
    ("GET", "/repos/{owner}/{repo}/subscribers"),
    // issues
    ("GET POST", "/repos/{owner}/{repo}/issues"),
    (
        "GET PATCH",
        "/repos/{owner}/{repo}/issues/{issue_number:int}",
    ),
    (
        "GET POST",
        "/repos/{owner}/{repo}/issues/{issue_number:int}/comments",
    ),
    (
        "GET",
        "/repos/{owner}/{repo}/issues/{issue_number:int}/events",
    ),
    (
        "PUT DELETE",
        "/repos/{owner}/{repo}/issues/{issue_number:int}/lock",
    ),
    ("GET", "/repos/{owner}/{repo}/issues/comments"),
    (
        "GET PATCH",
        "/repos/{owner}/{repo}/issues/comments/{comment_id:int}",
    ),
    ("GET", "/repos/{owner}/{repo}/labels"),
    ("GET DELETE", "/repos/{owner}/{repo}/labels/{name}"),
    ("GET", "/repos/{owner}/{repo}/milestones"),
    (
        "GET PATCH",
        "/repos/{owner}/{repo}/milestones/{milestone_number:int}",
    ),
    // pull requests
    ("GET POST", "/repos/{owner}/{repo}/pulls"),
    ("GET PATCH", "/repos/{owner}/{repo}/pulls/{pull_number:int}"),
    (
        "GET",
        "/repos/{owner}/{repo}/pulls/{pull_number:int}/commits",
    ),
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number:int}/files"),
    ("PUT", "/repos/{owner}/{repo}/pulls/{pull_number:int}/merge"),
    (
        "GET",
        "/repos/{owner}/{repo}/pulls/{pull_number:int}/reviews",
    ),
    (
        "GET",
        "/repos/{owner}/{repo}/pulls/{pull_number:int}/reviews/{review_id:int}",
    ),
    // commits, branches, releases
    ("GET", "/repos/{owner}/{repo}/commits"),
    ("GET", "/repos/{owner}/{repo}/commits/{sha:hex}"),
    ("GET", "/repos/{owner}/{repo}/commits/{sha:hex}/status"),
    ("GET", "/repos/{owner}/{repo}/branches"),
    ("GET", "/repos/{owner}/{repo}/branches/{branch}"),
    (
        "GET PUT",
        "/repos/{owner}/{repo}/branches/{branch}/protection",
    ),
    ("GET POST", "/repos/{owner}/{repo}/releases"),
    ("GET", "/repos/{owner}/{repo}/releases/latest"),
    ("GET", "/repos/{owner}/{repo}/releases/tags/{tag}"),
    (
        "GET DELETE",
        "/repos/{owner}/{repo}/releases/{release_id:int}",
    ),
    (
        "GET",
        "/repos/{owner}/{repo}/releases/{release_id:int}/assets",
    ),
    // hooks, collaborators, deployments, actions
    ("GET", "/repos/{owner}/{repo}/hooks"),
    ("GET DELETE", "/repos/{owner}/{repo}/hooks/{hook_id:int}"),
    ("GET", "/repos/{owner}/{repo}/collaborators"),
    (
        "PUT DELETE",
        "/repos/{owner}/{repo}/collaborators/{username}",
    ),
    ("GET", "/repos/{owner}/{repo}/deployments"),
    (
        "GET",
        "/repos/{owner}/{repo}/deployments/{deployment_id:int}",
    ),
    ("GET", "/repos/{owner}/{repo}/actions/runs"),
    ("GET", "/repos/{owner}/{repo}/actions/runs/{run_id:int}"),
    ("GET", "/repos/{owner}/{repo}/actions/workflows"),
    (
        "GET",
        "/repos/{owner}/{repo}/actions/workflows/{workflow_id:int}/runs",
    ),
    // users
    ("GET", "/users/{username}"),
    ("GET", "/users/{username}/repos"),
    ("GET", "/users/{username}/followers"),
    ("GET", "/users/{username}/following"),
    ("GET", "/users/{username}/gists"),
    ("GET", "/users/{username}/orgs"),
    ("GET", "/users/{username}/events"),
    // the authenticated user
    ("GET PATCH", "/user"),
    ("GET POST", "/user/repos"),
    ("GET POST", "/user/emails"),
    ("GET", "/user/followers"),
    ("PUT DELETE", "/user/following/{username}"),
    ("GET", "/user/starred"),
    ("GET", "/user/keys"),
    ("GET", "/user/keys/{key_id:int}"),
    // organisations and teams
    ("GET", "/orgs/{org}"),
    ("GET POST", "/orgs/{org}/repos"),
    ("GET", "/orgs/{org}/members"),
    ("DELETE", "/orgs/{org}/members/{username}"),
    ("GET", "/orgs/{org}/teams"),
    ("GET PATCH", "/orgs/{org}/teams/{team_slug}"),
    ("GET", "/orgs/{org}/teams/{team_slug}/members"),
    ("GET", "/orgs/{org}/hooks"),
    // gists
    ("GET POST", "/gists"),
    ("GET", "/gists/public"),
    ("GET", "/gists/starred"),
    ("GET PATCH DELETE", "/gists/{gist_id:hex}"),
    ("GET", "/gists/{gist_id:hex}/comments"),
    ("PUT DELETE", "/gists/{gist_id:hex}/star"),
    // search
    ("GET", "/search/repositories"),
    ("GET", "/search/code"),
    ("GET", "/search/issues"),
    ("GET", "/search/users"),
    ("GET", "/search/commits"),
    ("GET", "/search/topics"),
    // notifications, events, misc
    ("GET PUT", "/notifications"),
    ("GET", "/notifications/threads/{thread_id:int}"),
    ("GET", "/events"),
    ("GET", "/feeds"),
    ("GET", "/emojis"),
    ("GET", "/meta"),
    ("GET", "/rate_limit"),
    ("GET", "/licenses"),
    ("GET", "/licenses/{license}"),
    ("GET", "/gitignore/templates"),
    ("GET", "/gitignore/templates/{name}"),
    ("POST", "/markdown"),
    ("GET", "/zen"),
    ("POST DELETE", "/applications/{client_id}/token"),
];

/// A parameter's kind: what its regex accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ParamKind {
    /// `[^/]+`: any non-empty segment.
    Segment,
    /// `\d+`.
    Number,
    /// `[0-9a-f]+`.
    Hex,
}

impl ParamKind {
    /// The regex the parameter's group holds.
    pub fn regex(self) -> &'static str {
        match self {
            ParamKind::Segment => "[^/]+",
            ParamKind::Number => r"\d+",
            ParamKind::Hex => "[0-9a-f]+",
        }
    }
}

/// One piece of a parsed endpoint path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    Static(&'static str),
    Param(&'static str, ParamKind),
}

/// The segments of an endpoint path (`/repos/{owner}` → `[Static("repos"), Param("owner")]`).
pub(crate) fn pieces(path: &'static str) -> Vec<Piece> {
    path.split('/')
        .skip(1)
        .map(
            |seg| match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                None => Piece::Static(seg),
                Some(p) => match p.split_once(':') {
                    None => Piece::Param(p, ParamKind::Segment),
                    Some((name, "int")) => Piece::Param(name, ParamKind::Number),
                    Some((name, "hex")) => Piece::Param(name, ParamKind::Hex),
                    Some((_, kind)) => panic!("unknown parameter kind {kind:?} in {path}"),
                },
            },
        )
        .collect()
}

/// Every `(method, path)` route of the list, in list order.
pub(crate) fn routes() -> Vec<(&'static str, &'static str)> {
    ENDPOINTS
        .iter()
        .flat_map(|&(methods, path)| methods.split(' ').map(move |m| (m, path)))
        .collect()
}
