//! The workload's `kong-traditional` family against Kong's own transform: Kong Gateway's
//! `kong/router/transform.lua`, loaded unchanged from a checkout of Kong and run in LuaJIT over
//! the family's Kong configurations, must give every entry the family gives (the same split,
//! the same expression text, the same priority, number or `uint64_t`).
//!
//! A development test: it runs when `ATC_KONG_SOURCE` names a Kong checkout (a directory with
//! `kong/router/transform.lua`) and `luajit` is on the path, and otherwise says why it skipped.
//! Kong's modules that transform.lua requires beyond LuaJIT's are replaced by small stand-ins
//! (an LRU cache, the `~` test, the header name rule, a copy of a table, and a split id that
//! is `<route id>#<group>` instead of a v5 UUID): what is checked is transform.lua's own logic.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use atc_workload::kong::LuaPriority;

/// An entry: configuration route id, path group, priority (`n:` a number, `u:` a uint64_t),
/// expression.
type Entry = (String, usize, String, String);

const HARNESS: &str = r#"
local source, routes_file, jit_mode = ...
if jit_mode == "off" then jit.off() end
package.path = source .. "/?.lua;" .. package.path
ngx = { null = {}, ERR = 4, WARN = 5, log = function() end, re = {} }
package.preload["resty.lrucache"] = function()
    return { new = function()
        local t = {}
        return { get = function(_, k) return t[k] end, set = function(_, k, v) t[k] = v end }
    end }
end
package.preload["resty.jit-uuid"] = function()
    return { factory_v5 = function() return function(name) return name end end }
end
package.preload["resty.ipmatcher"] = function() return {} end
package.preload["kong.router.utils"] = function()
    return { is_regex_magic = function(p) return p:byte(1) == 126 end }
end
package.preload["kong.tools.string"] = function()
    return { replace_dashes_lower = function(s) return (s:gsub("-", "_"):lower()) end }
end
package.preload["kong.tools.table"] = function()
    return { shallow_copy = function(t)
        local c = {}
        for k, v in pairs(t) do c[k] = v end
        return c
    end }
end
local transform = require("kong.router.transform")
local list = {}
for line in io.lines(routes_file) do
    list[#list + 1] = { route = assert(loadstring("return " .. line))() }
end
list = transform.split_routes_and_services_by_path(list)
for _, rs in ipairs(list) do
    local r = rs.route
    local original, group = r.id:match("^(.*)#(%d+)$")
    local p = transform.get_priority(r)
    local text
    if type(p) == "number" then
        text = string.format("n:%d", p)
    else
        text = "u:" .. tostring(p):gsub("ULL$", "")
    end
    io.write(original or r.id, "\t", group or "1", "\t", text, "\t",
        transform.get_expression(r), "\n")
end
"#;

fn kong_source() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("ATC_KONG_SOURCE")?);
    dir.join("kong/router/transform.lua")
        .is_file()
        .then_some(dir)
}

#[test]
fn the_family_is_what_kongs_transform_makes_of_its_configurations() {
    let Some(source) = kong_source() else {
        eprintln!(
            "skipped: set ATC_KONG_SOURCE to a Kong checkout (kong/router/transform.lua) to \
             check the kong-traditional family against Kong's transform"
        );
        return;
    };
    if Command::new("luajit").arg("-v").output().is_err() {
        eprintln!("skipped: no luajit on the path");
        return;
    }
    let dir = std::env::temp_dir().join(format!("atc-kong-transform-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let harness = dir.join("harness.lua");
    std::fs::write(&harness, HARNESS).unwrap();
    for (n, seed) in [(1_000, 1), (10_000, 2), (30_000, 3)] {
        let configs = atc_workload::kong_configuration(n, seed);
        // One route per line, each read as a chunk of its own (a chunk holds 65,536 constants).
        let mut lua = String::new();
        for c in &configs {
            let _ = writeln!(lua, "{}", c.to_lua());
        }
        let file = dir.join(format!("routes-{n}.lua"));
        std::fs::write(&file, lua).unwrap();
        let run = |jit: &str| {
            let out = Command::new("luajit")
                .arg(&harness)
                .arg(&source)
                .arg(&file)
                .arg(jit)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "Kong's transform failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let mut entries: Vec<Entry> = String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(|l| {
                    let f: Vec<&str> = l.splitn(4, '\t').collect();
                    (
                        f[0].to_string(),
                        f[1].parse().unwrap(),
                        f[2].to_string(),
                        f[3].to_string(),
                    )
                })
                .collect();
            entries.sort();
            entries
        };
        // Interpreted: LuaJIT's interpreter converts a negative number to uint64_t as 2^63,
        // compiled code as the two's complement, so Kong's priorities depend on which of its
        // calls were compiled. The family models the interpreter; the compiled run is counted.
        let kong = run("off");
        let compiled = run("on");
        let mut ours: Vec<Entry> = configs
            .iter()
            .flat_map(|c| {
                c.transform().into_iter().map(|e| {
                    let p = match e.priority {
                        LuaPriority::Number(n) => format!("n:{n}"),
                        LuaPriority::U64(u) => format!("u:{u}"),
                    };
                    (c.id.clone(), e.group, p, e.expression)
                })
            })
            .collect();
        ours.sort();
        assert_eq!(ours.len(), kong.len(), "entries at {n} routes");
        let negative = ours.iter().filter(|e| e.2.starts_with("n:-")).count();
        let split = ours.iter().filter(|e| e.1 > 1).count();
        for (o, k) in ours.iter().zip(&kong) {
            assert_eq!(o, k, "at {n} routes");
        }
        let jit_differs = compiled.iter().zip(&kong).filter(|(c, k)| c != k).count();
        eprintln!(
            "{n} routes: {} entries alike, {split} from splits, {negative} with a negative \
             priority; {jit_differs} get another priority when Kong's transform is compiled",
            ours.len()
        );
        assert!(
            negative > 0 && split > 0,
            "the family lacks Kong's hard cases"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
