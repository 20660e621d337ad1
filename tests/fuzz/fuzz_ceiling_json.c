/* fuzz_ceiling_json.c - libFuzzer target for sb_ceiling_from_json (the results database's
 * ceiling cache is read back through it). Build and run from the project root:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -DSB_VERSION='"fuzz"' \
 *     -Iinclude tests/fuzz/fuzz_ceiling_json.c src/task/*.c src/core/json_writer.c \
 *     src/core/status.c src/core/timer.c src/core/rng_*.c -ljansson -lm -fopenmp \
 *     -lopenblas -o /tmp/fuzz_ceiling && /tmp/fuzz_ceiling -max_total_time=60
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "task/ceiling.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    sb_ceiling c;
    sb_error err = {0};
    if (sb_ceiling_from_json(text, &c, &err) == SB_OK) {
        /* whatever was accepted gives a defined effective memory */
        (void)sb_ceiling_effective_memory(&c, 0.5);
    }
    free(text);
    return 0;
}
