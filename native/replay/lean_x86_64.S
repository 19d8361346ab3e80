/*
 * lean_x86_64.S: the lean loop of plain mode, by hand, so that the harness
 * stays under 10 instructions per replayed event (gcc's computed-goto code
 * shuffles registers and spends 11 to 13).  exec.c holds the same loop in C
 * for other machines, and says what each op means.
 *
 *   void **rp_lean_x86_64(const rp_op_t *op, void **obj, void **slot, rp_ctx_t *ctx,
 *                         const rp_calls_t *calls)
 *
 *   rbx  op      the op being run (16 bytes: w = size << 8 | op byte, x)
 *   r12  obj     object id -> pointer
 *   r13  slot    obj + the next object id
 *   r14  ctx     for the rare path
 *   r15  calls   malloc, calloc, realloc, free: the allocator's own entry
 *                points, or the rp_call_* functions that callgrind counts by
 *   rbp  .Ltable 256 handlers, indexed by the op byte
 *
 * Instructions per event, the allocator's call excluded (its `call` counted):
 *   malloc  mov shr call | mov add | add mov movzbl jmp        = 9
 *   free    mov mov call | add mov movzbl jmp                  = 7
 * Any other op byte (flags, realloc_free, the memalign family) goes to
 * rp_lean_rare (exec.c), one op at a time; byte 0xff (RP_OP_END) returns.
 */
    .text
    .p2align 4
    .globl rp_lean_x86_64
    .hidden rp_lean_x86_64
    .type rp_lean_x86_64, @function
rp_lean_x86_64:
    .cfi_startproc
    push %rbx
    .cfi_adjust_cfa_offset 8
    .cfi_offset %rbx, -16
    push %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_offset %rbp, -24
    push %r12
    .cfi_adjust_cfa_offset 8
    .cfi_offset %r12, -32
    push %r13
    .cfi_adjust_cfa_offset 8
    .cfi_offset %r13, -40
    push %r14
    .cfi_adjust_cfa_offset 8
    .cfi_offset %r14, -48
    push %r15
    .cfi_adjust_cfa_offset 8
    .cfi_offset %r15, -56
    sub $8, %rsp               /* keeps calls 16-byte aligned */
    .cfi_adjust_cfa_offset 8
    mov %rdi, %rbx
    mov %rsi, %r12
    mov %rdx, %r13
    mov %rcx, %r14
    mov %r8, %r15
    lea .Ltable(%rip), %rbp
    mov (%rbx), %rax
    movzbl %al, %ecx
    jmp *(%rbp,%rcx,8)

    .p2align 4
.Lmalloc:
    mov %rax, %rdi
    shr $8, %rdi
    call *(%r15)
.Lstore:
    mov %rax, (%r13)
    add $8, %r13
.Lnext:
    add $16, %rbx
    mov (%rbx), %rax
    movzbl %al, %ecx
    jmp *(%rbp,%rcx,8)

    .p2align 4
.Lfree:
    mov 8(%rbx), %rax
    mov (%r12,%rax,8), %rdi
    call *24(%r15)
    add $16, %rbx
    mov (%rbx), %rax
    movzbl %al, %ecx
    jmp *(%rbp,%rcx,8)

    .p2align 4
.Lcalloc:
    mov %rax, %rsi
    shr $8, %rsi
    mov $1, %edi
    call *8(%r15)
    jmp .Lstore

    .p2align 4
.Lrealloc:
    mov %rax, %rsi
    shr $8, %rsi
    mov 8(%rbx), %rax
    mov (%r12,%rax,8), %rdi
    call *16(%r15)
    jmp .Lstore

    .p2align 4
.Lrare:
    mov %rbx, %rdi
    mov %r13, %rsi
    mov %r14, %rdx
    call rp_lean_rare
    mov %rax, %r13
    jmp .Lnext

    .p2align 4
.Ldone:
    mov %r13, %rax
    add $8, %rsp
    .cfi_adjust_cfa_offset -8
    pop %r15
    .cfi_adjust_cfa_offset -8
    pop %r14
    .cfi_adjust_cfa_offset -8
    pop %r13
    .cfi_adjust_cfa_offset -8
    pop %r12
    .cfi_adjust_cfa_offset -8
    pop %rbp
    .cfi_adjust_cfa_offset -8
    pop %rbx
    .cfi_adjust_cfa_offset -8
    ret
    .cfi_endproc
    .size rp_lean_x86_64, .-rp_lean_x86_64

/* The handlers by op byte: kinds 0 malloc, 1 calloc, 2 realloc, 8 free run
 * inline; 255 ends the chunk; everything else is rare. */
    .section .data.rel.ro.local, "aw"
    .p2align 3
.Ltable:
    .quad .Lmalloc, .Lcalloc, .Lrealloc, .Lrare, .Lrare, .Lrare, .Lrare, .Lrare
    .quad .Lfree, .Lrare
    .rept 245
    .quad .Lrare
    .endr
    .quad .Ldone

    .section .note.GNU-stack, "", @progbits
