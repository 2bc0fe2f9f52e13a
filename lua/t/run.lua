-- Runs every test of binding_test.lua, gateway_test.lua and etcd_test.lua in this LuaJIT (no Rust harness), e.g.
--   LUA_PATH='lua/?.lua;lua/t/?.lua' LUA_CPATH='target/lib/?.so' luajit lua/t/run.lua
-- where target/lib/libatc_router.so is the library under test (`make -C ffi lib` puts it there).
local passed, failed = 0, 0
for _, module in ipairs({ "binding_test", "gateway_test", "etcd_test" }) do
    local tests = require(module)
    local names = {}
    for name in pairs(tests) do
        names[#names + 1] = name
    end
    table.sort(names)
    for _, name in ipairs(names) do
        local ok, err = xpcall(tests[name], debug.traceback)
        collectgarbage()
        collectgarbage()
        if ok then
            passed = passed + 1
        else
            failed = failed + 1
            io.stderr:write("FAIL ", module, ".", name, "\n", tostring(err), "\n")
        end
    end
end
print(string.format("%d passed, %d failed", passed, failed))
os.exit(failed == 0 and 0 or 1)
