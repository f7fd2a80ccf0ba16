// The Lua C API, with C linkage (liblua5.4 is a C library that reports errors
// with longjmp: see sandbox.hpp for the rules that makes C++ follow).
#pragma once

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
}
