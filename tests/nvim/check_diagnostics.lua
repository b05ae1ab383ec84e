-- Neovim (0.7+) as a real LSP client for `shardlint server`; run by tests/test_lsp.cpp:
--
--   SHARDLINT_BINARY=build/shardlint SHARDLINT_FIXTURE=/tmp/x/train.py SHARDLINT_OUT=/tmp/x/out.txt \
--     timeout 60 nvim --headless --clean -c 'luafile tests/nvim/check_diagnostics.lua'
--
-- Starts the server with vim.lsp.start_client (the 0.7 API), opens the fixture, waits (bounded)
-- for its diagnostics and writes them to SHARDLINT_OUT as `line:col code message` (0-based line,
-- 0-based byte column as Neovim stores them), then quits: exit status 0 when diagnostics
-- arrived, 1 otherwise.

local binary = os.getenv("SHARDLINT_BINARY")
local fixture = os.getenv("SHARDLINT_FIXTURE")
local out_path = os.getenv("SHARDLINT_OUT")

local function finish(lines, status)
  local f = io.open(out_path or "/dev/stderr", "w")
  if f then
    f:write(table.concat(lines, "\n") .. "\n")
    f:close()
  end
  vim.cmd(status == 0 and "qall!" or "cquit! " .. status)
end

if not (binary and fixture and out_path) then
  finish({ "error: set SHARDLINT_BINARY, SHARDLINT_FIXTURE and SHARDLINT_OUT" }, 2)
  return
end

local client_id = vim.lsp.start_client({
  name = "shardlint",
  cmd = { binary, "server" },
  root_dir = vim.fn.fnamemodify(fixture, ":p:h"),
})
if not client_id then
  finish({ "error: vim.lsp.start_client failed for " .. binary }, 1)
  return
end

vim.cmd("edit " .. vim.fn.fnameescape(fixture))
local bufnr = vim.api.nvim_get_current_buf()
vim.lsp.buf_attach_client(bufnr, client_id)

local arrived = vim.wait(30000, function()
  return #vim.diagnostic.get(bufnr) > 0
end, 50)

local lines = {}
for _, d in ipairs(vim.diagnostic.get(bufnr)) do
  table.insert(lines, string.format("%d:%d %s %s", d.lnum, d.col, tostring(d.code), d.message))
end
if not arrived then
  table.insert(lines, "error: no diagnostics within 30 s")
end

local client = vim.lsp.get_client_by_id(client_id)
if client then
  client.stop()
  vim.wait(5000, function()
    return client.is_stopped()
  end, 50)
end
finish(lines, arrived and 0 or 1)
