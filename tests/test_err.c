/* test_err.c - error messages stay one line (sim/core/err.c, issue 21 F5).
 *
 * hs_err_escape escapes control characters as \n, \r, \t or \xHH, keeps
 * everything else (UTF-8 included) and truncates at a whole escape; hs_errf
 * and hs_err_prefix apply it, so a newline or a terminal escape taken from
 * the input never reaches stderr raw; a message that needs no escaping is
 * left byte for byte as formatted. */
#include "check.h"

#include <string.h>

#include "core/err.h"

int main(void)
{
    char b[64];
    hs_err err = {0};

    CHECK_INT(hs_err_escape(b, sizeof b, "a\nb\rc\td\033[31m\x7f", 13), strlen(b));
    CHECK_STR(b, "a\\nb\\rc\\td\\x1b[31m\\x7f");
    CHECK_INT(hs_err_escape(b, sizeof b, "caf\xc3\xa9 \"q\"", 9), 9);
    CHECK_STR(b, "caf\xc3\xa9 \"q\"");
    /* stops at a NUL inside n; never splits an escape when truncating */
    hs_err_escape(b, sizeof b, "ab\0cd", 5);
    CHECK_STR(b, "ab");
    hs_err_escape(b, 5, "abc\n", 4);
    CHECK_STR(b, "abc");
    hs_err_escape(b, 6, "abc\001", 4);
    CHECK_STR(b, "abc");
    CHECK_INT(hs_err_escape(b, 0, "x", 1), 0);

    CHECK_INT(hs_errf(&err, HS_EPARSE, "%s: unknown key \"%s\"", "f.json", "a\nb"), HS_EPARSE);
    CHECK_STR(err.msg, "f.json: unknown key \"a\\nb\"");
    CHECK_INT(err.code, HS_EPARSE);
    CHECK_INT(hs_err_prefix(&err, "while loading \"%s\": ", "m\033"), HS_EPARSE);
    CHECK_STR(err.msg, "while loading \"m\\x1b\": f.json: unknown key \"a\\nb\"");
    /* nothing to escape: untouched, percent signs and all */
    hs_errf(&err, HS_ERANGE, "%s", "50% of \\n is literal");
    CHECK_STR(err.msg, "50% of \\n is literal");
    /* a message of control characters filling the buffer stays one line and
     * terminated */
    {
        char big[HS_ERR_MSG_MAX * 2];
        memset(big, '\n', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        hs_errf(&err, HS_EPARSE, "%s", big);
        CHECK(strlen(err.msg) < sizeof err.msg);
        CHECK(strchr(err.msg, '\n') == NULL);
        CHECK(strncmp(err.msg, "\\n\\n", 4) == 0);
    }
    return hs_check_result();
}
