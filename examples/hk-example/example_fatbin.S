/* The kernels' fatbin (made by nvcc from example_kernels.cu), as read-only
 * data in the plugin: example_fatbin .. example_fatbin_end. The Makefile
 * assembles this in the directory where the fatbin is. Hidden names: only
 * hk_plugin_negotiate leaves the plugin. */
    .section .rodata.example_fatbin, "a", @progbits
    .balign 64
    .globl example_fatbin
    .hidden example_fatbin
example_fatbin:
    .incbin "example_kernels.fatbin"
    .globl example_fatbin_end
    .hidden example_fatbin_end
example_fatbin_end:
    .byte 0
    .section .note.GNU-stack, "", @progbits
