// Host emulation of Lycaon's CUDA kernels: the very same kernel sources, compiled by the system
// C++ compiler against cuda_shim.h, and one launch function per kernel that walks the grid
// sequentially. Built by build.rs only with the `emulate` feature; called from src/emulated.rs.
#include "cuda_shim.h"

#include <ucontext.h>

#include <functional>
#include <memory>
#include <vector>

thread_local lyc_dim3 blockIdx;
thread_local lyc_dim3 threadIdx;
thread_local lyc_dim3 blockDim;
thread_local lyc_dim3 gridDim;
thread_local unsigned long long lyc_emulated_shared[LYC_EMULATED_SHARED_WORDS];

// One fiber per thread of a block, for kernels that synchronise with __syncthreads.
namespace {
struct LycFiber {
    ucontext_t context;
    bool done = false;
    unsigned long long barriers = 0;
};
// Fiber stacks, reused by every block of every launch on this host thread.
const size_t lyc_stack_bytes = 32 * 1024;
thread_local std::vector<std::unique_ptr<char[]>> lyc_stacks;
thread_local ucontext_t lyc_scheduler;
thread_local LycFiber* lyc_current = nullptr;
thread_local const std::function<void()>* lyc_body = nullptr;

void lyc_fiber_entry() {
    (*lyc_body)();
    lyc_current->done = true;
    // Returning resumes uc_link, the scheduler.
}
}  // namespace

// Makes `f` start lyc_fiber_entry on `stack` (a separate function: getcontext returns twice in
// principle, which must not touch the scheduler's locals).
static void lyc_prepare_fiber(LycFiber* f, char* stack) {
    getcontext(&f->context);
    f->context.uc_stack.ss_sp = stack;
    f->context.uc_stack.ss_size = lyc_stack_bytes;
    f->context.uc_link = &lyc_scheduler;
    makecontext(&f->context, lyc_fiber_entry, 0);
}

void __syncthreads() {
    LycFiber* self = lyc_current;
    self->barriers += 1;
    swapcontext(&self->context, &lyc_scheduler);
}

// Runs one block of bx threads as fibers: every round resumes each unfinished thread until its
// next barrier or its end. Returns false if the threads disagree on the barriers (a kernel bug
// that deadlocks or races on a device): some wait at a barrier that others never reach.
static bool lyc_run_block_with_barriers(unsigned bx, int reversed, const std::function<void()>& body) {
    std::vector<LycFiber> fibers(bx);
    lyc_body = &body;
    while (lyc_stacks.size() < bx) lyc_stacks.emplace_back(new char[lyc_stack_bytes]);
    for (unsigned t = 0; t < bx; ++t) lyc_prepare_fiber(&fibers[t], lyc_stacks[t].get());
    for (unsigned long long round = 0;; ++round) {
        bool waiting = false;
        for (unsigned s = 0; s < bx; ++s) {
            const unsigned t = reversed ? bx - 1 - s : s;
            LycFiber& f = fibers[t];
            if (f.done) continue;
            threadIdx = {t, 0, 0};
            lyc_current = &f;
            swapcontext(&lyc_scheduler, &f.context);
            waiting = waiting || !f.done;
        }
        if (!waiting) break;
        for (const auto& f : fibers) {
            if (f.done || f.barriers != round + 1) return false;
        }
    }
    lyc_current = nullptr;
    return true;
}

// The kernels, in the order src/kernels.rs hands them to NVRTC.
#include "../kernels/common.cuh"
#include "../kernels/ntt.cu"
#include "../kernels/elementwise.cu"
#include "../kernels/base_conversion.cu"
#include "../kernels/inner_product.cu"
#include "../kernels/encoding.cu"

// Visits every (block, thread) (its locals are prefixed so as not to shadow kernel arguments) of a grid of gx * gy * gz blocks of bx threads; `reversed` walks
// the grid backwards, which must not change any result.
#define LYC_EMULATE_GRID(CALL)                                                              \
    do {                                                                                    \
        gridDim = {gx, gy, gz};                                                             \
        blockDim = {bx, 1, 1};                                                              \
        const unsigned long long lyc_blocks = (unsigned long long)gx * gy * gz;             \
        for (unsigned long long lyc_s = 0; lyc_s < lyc_blocks; ++lyc_s) {                   \
            const unsigned long long lyc_b = reversed ? lyc_blocks - 1 - lyc_s : lyc_s;     \
            blockIdx = {(unsigned)(lyc_b % gx), (unsigned)(lyc_b / gx % gy), (unsigned)(lyc_b / gx / gy)}; \
            for (unsigned lyc_t = 0; lyc_t < bx; ++lyc_t) {                                 \
                threadIdx = {reversed ? bx - 1 - lyc_t : lyc_t, 0, 0};                      \
                CALL;                                                                       \
            }                                                                               \
        }                                                                                   \
    } while (0)

#define LYC_GRID_PARAMS unsigned gx, unsigned gy, unsigned gz, unsigned bx, int reversed

extern "C" void lyc_emulate_ntt_forward_stage(LYC_GRID_PARAMS, u64* data, const u64* roots, const u64* roots_shoup,
                                              const u64* mods, u32 n, u32 m) {
    LYC_EMULATE_GRID(lycaon_ntt_forward_stage(data, roots, roots_shoup, mods, n, m));
}

extern "C" void lyc_emulate_ntt_inverse_stage(LYC_GRID_PARAMS, u64* data, const u64* inv_roots,
                                              const u64* inv_roots_shoup, const u64* mods, const u64* last_consts,
                                              u32 n, u32 h) {
    LYC_EMULATE_GRID(lycaon_ntt_inverse_stage(data, inv_roots, inv_roots_shoup, mods, last_consts, n, h));
}

extern "C" void lyc_emulate_mul_pointwise(LYC_GRID_PARAMS, u64* a, const u64* b, const u64* mods, u32 n) {
    LYC_EMULATE_GRID(lycaon_mul_pointwise(a, b, mods, n));
}

extern "C" void lyc_emulate_automorphism_ntt(LYC_GRID_PARAMS, u64* out, const u64* input, u32 n, u32 log_n,
                                             u64 galois) {
    LYC_EMULATE_GRID(lycaon_automorphism_ntt(out, input, n, log_n, galois));
}

extern "C" void lyc_emulate_convert_scale(LYC_GRID_PARAMS, u64* scaled, const u64* input, const u64* mods_from,
                                          const u64* punctured_inv, u32 n) {
    LYC_EMULATE_GRID(lycaon_convert_scale(scaled, input, mods_from, punctured_inv, n));
}

extern "C" void lyc_emulate_convert_accumulate(LYC_GRID_PARAMS, u64* out, const u64* scaled, const u64* mods_to,
                                               const u64* punctured_mod_to, const double* inv_q_from,
                                               const u64* q_mod_to, u32 n, u32 l_from, u32 centered) {
    LYC_EMULATE_GRID(
        lycaon_convert_accumulate(out, scaled, mods_to, punctured_mod_to, inv_q_from, q_mod_to, n, l_from, centered));
}

extern "C" void lyc_emulate_inner_product(LYC_GRID_PARAMS, u64* out, const u64* digits, const u64* keys,
                                          const u64* mods, u32 n, u32 limbs, u32 num_digits) {
    LYC_EMULATE_GRID(lycaon_inner_product(out, digits, keys, mods, n, limbs, num_digits));
}

extern "C" void lyc_emulate_add_sub(LYC_GRID_PARAMS, u64* a, const u64* b, const u64* mods, u32 n, u32 op) {
    LYC_EMULATE_GRID(lycaon_add_sub(a, b, mods, n, op));
}

extern "C" void lyc_emulate_limb_constants(LYC_GRID_PARAMS, u64* a, const u64* consts, const u64* imag_unit,
                                           const u64* mods, u32 n, u32 op) {
    LYC_EMULATE_GRID(lycaon_limb_constants(a, consts, imag_unit, mods, n, op));
}

extern "C" void lyc_emulate_tensor(LYC_GRID_PARAMS, u64* d0, u64* d1, u64* d2, const u64* a0, const u64* a1,
                                   const u64* b0, const u64* b1, const u64* mods, u32 n) {
    LYC_EMULATE_GRID(lycaon_tensor(d0, d1, d2, a0, a1, b0, b1, mods, n));
}

extern "C" void lyc_emulate_ntt_forward_last_sub_scale(LYC_GRID_PARAMS, u64* out, const u64* data, const u64* roots,
                                                       const u64* roots_shoup, const u64* mods, const u64* consts,
                                                       u32 n) {
    LYC_EMULATE_GRID(lycaon_ntt_forward_last_sub_scale(out, data, roots, roots_shoup, mods, consts, n));
}

extern "C" void lyc_emulate_rescale_spread(LYC_GRID_PARAMS, u64* out, const u64* last, const u64* last_mod,
                                           const u64* mods, u32 n, u64 q_last) {
    LYC_EMULATE_GRID(lycaon_rescale_spread(out, last, last_mod, mods, n, q_last));
}

extern "C" void lyc_emulate_inner_product_resident(LYC_GRID_PARAMS, u64* out0, u64* out1, const u64* digits, const u64* keys,
                                                   const u64* key_limbs, const u64* mods, u32 n, u32 limbs,
                                                   u32 num_digits, u32 key_digits, u32 key_limbs_total) {
    LYC_EMULATE_GRID(lycaon_inner_product_resident(out0, out1, digits, keys, key_limbs, mods, n, limbs, num_digits, key_digits,
                                                   key_limbs_total));
}

// A grid of blocks whose threads meet at barriers; returns 0, or 1 if a block's threads disagreed
// on the barriers.
#define LYC_EMULATE_GRID_WITH_BARRIERS(CALL)                                                \
    do {                                                                                    \
        gridDim = {gx, gy, gz};                                                             \
        blockDim = {bx, 1, 1};                                                              \
        const unsigned long long lyc_blocks = (unsigned long long)gx * gy * gz;             \
        const std::function<void()> lyc_call = [&]() { CALL; };                              \
        for (unsigned long long lyc_s = 0; lyc_s < lyc_blocks; ++lyc_s) {                   \
            const unsigned long long lyc_b = reversed ? lyc_blocks - 1 - lyc_s : lyc_s;     \
            blockIdx = {(unsigned)(lyc_b % gx), (unsigned)(lyc_b / gx % gy), (unsigned)(lyc_b / gx / gy)}; \
            if (!lyc_run_block_with_barriers(bx, reversed, lyc_call)) return 1;             \
        }                                                                                   \
        return 0;                                                                           \
    } while (0)

extern "C" int lyc_emulate_ntt_forward_tail(LYC_GRID_PARAMS, u64* data, const u64* roots, const u64* roots_shoup,
                                            const u64* mods, u32 n, u32 m_start, u32 m_end) {
    LYC_EMULATE_GRID_WITH_BARRIERS(lycaon_ntt_forward_tail(data, roots, roots_shoup, mods, n, m_start, m_end));
}

extern "C" int lyc_emulate_ntt_inverse_head(LYC_GRID_PARAMS, u64* data, const u64* inv_roots, const u64* inv_roots_shoup,
                                            const u64* mods, const u64* last_consts, u32 n, u32 h_min) {
    LYC_EMULATE_GRID_WITH_BARRIERS(lycaon_ntt_inverse_head(data, inv_roots, inv_roots_shoup, mods, last_consts, n, h_min));
}

extern "C" void lyc_emulate_mul_add(LYC_GRID_PARAMS, u64* acc, const u64* a, const u64* b, const u64* mods, u32 n) {
    LYC_EMULATE_GRID(lycaon_mul_add(acc, a, b, mods, n));
}

extern "C" void lyc_emulate_fft_inverse_stage(LYC_GRID_PARAMS, u64* re, u64* im, const u64* ksi, const u64* rot_group, u32 m,
                                              u32 size, u32 len) {
    LYC_EMULATE_GRID(lycaon_fft_inverse_stage(re, im, ksi, rot_group, m, size, len));
}

extern "C" void lyc_emulate_fft_finish(LYC_GRID_PARAMS, u64* out_re, u64* out_im, const u64* in_re, const u64* in_im,
                                       u32 size, u32 log_size, u64 inv_bits) {
    LYC_EMULATE_GRID(lycaon_fft_finish(out_re, out_im, in_re, in_im, size, log_size, inv_bits));
}

extern "C" void lyc_emulate_abs_max(LYC_GRID_PARAMS, u64* partial, const u64* re, const u64* im, u32 size) {
    LYC_EMULATE_GRID(lycaon_abs_max(partial, re, im, size));
}

extern "C" void lyc_emulate_encode_round(LYC_GRID_PARAMS, u64* out, const u64* re, const u64* im, const u64* mods, u32 n,
                                         u32 slots, u64 scale_bits) {
    LYC_EMULATE_GRID(lycaon_encode_round(out, re, im, mods, n, slots, scale_bits));
}

extern "C" int lyc_emulate_inner_product_intt_head(LYC_GRID_PARAMS, u64* out0, u64* out1, const u64* digits, const u64* keys,
                                                   const u64* key_limbs, const u64* mods, const u64* inv_roots,
                                                   const u64* inv_roots_shoup, const u64* last_consts, u32 n, u32 limbs,
                                                   u32 q_limbs, u32 num_digits, u32 key_digits, u32 key_limbs_total,
                                                   u32 h_min) {
    LYC_EMULATE_GRID_WITH_BARRIERS(lycaon_inner_product_intt_head(out0, out1, digits, keys, key_limbs, mods, inv_roots, inv_roots_shoup,
                                                                  last_consts, n, limbs, q_limbs, num_digits, key_digits,
                                                                  key_limbs_total, h_min));
}
