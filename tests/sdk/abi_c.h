/* The C side of the SDK layout test: what a C compiler thinks the ABI looks like. */
#ifndef WEFT_TESTS_SDK_ABI_C_H_
#define WEFT_TESTS_SDK_ABI_C_H_

#include <stddef.h>

#include "weft/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_c_layout {
  const char *what; /* "struct.member", or a type name for its size */
  size_t offset;
  size_t size;
} weft_c_layout;

const weft_c_layout *weft_c_layout_rows(size_t *count);
/* A plugin entry point written in C. */
weft_plugin_entry_fn weft_c_entry(void);
int weft_c_field_type_json(void);
/* weft_action_name as a C caller sees it. */
const char *weft_c_action_name(uint32_t action);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TESTS_SDK_ABI_C_H_ */
