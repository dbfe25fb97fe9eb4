/* libFuzzer harness for the Lua 5.1 lexer and parser (respite: CVE-2025-46819 hunt).
 * Parses each input with luaL_loadbuffer and discards the result; nothing is run.
 * Build and run: see README.md in this directory. */
#include <stddef.h>
#include <stdint.h>

#include "lua.h"
#include "lauxlib.h"

static lua_State *L;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (L == NULL) {
    L = luaL_newstate();
    if (L == NULL) return 0;
  }
  /* "@user_script" is the chunk name EVAL uses, so error texts match the server's. */
  (void)luaL_loadbuffer(L, (const char *)data, size, "@user_script");
  lua_settop(L, 0);  /* drop the function or the error message */
  lua_gc(L, LUA_GCSTEP, 0);  /* keep the reused state's memory bounded */
  return 0;
}
