/* Embeds the file HK_EMBED_FILE as read-only data under the hidden symbol
 * HK_EMBED_SYMBOL (64-byte aligned) with HK_EMBED_SYMBOL##_end after its last
 * byte. Built by the HkEmbed builder (site_scons/site_tools/nvcc_fatbin.py). */
#define HK__CAT2(a, b) a##b
#define HK__CAT(a, b) HK__CAT2(a, b)
#define HK__END HK__CAT(HK_EMBED_SYMBOL, _end)

    .section .rodata.HK_EMBED_SYMBOL, "a", @progbits
    .balign 64
    .globl HK_EMBED_SYMBOL
    .hidden HK_EMBED_SYMBOL
    .type HK_EMBED_SYMBOL, @object
HK_EMBED_SYMBOL:
    .incbin HK_EMBED_FILE
    .size HK_EMBED_SYMBOL, . - HK_EMBED_SYMBOL
    .globl HK__END
    .hidden HK__END
HK__END:
    .byte 0
    .section .note.GNU-stack, "", @progbits
