// libkiln_cpuid_mask.so: makes an AVX-512 x86-64 Linux machine look like an AVX2-only one to
// every library in a process, onnxruntime's MLAS included, so that kiln's AVX2 path
// (KILN_CPU_ISA=avx2) can be measured against onnxruntime's AVX2 kernels like for like
// (issue 18). onnxruntime has no switch of its own for this.
//
//   LD_PRELOAD=build/bench/libkiln_cpuid_mask.so KILN_CPUID_MASK=avx2 python3 ...
//
// How: the constructor asks the kernel for CPUID faulting (arch_prctl(ARCH_SET_CPUID, 0),
// Intel's "cpuid_fault" flag in /proc/cpuinfo; KVM emulates it), after which every CPUID
// instruction in this process traps as SIGSEGV. The handler runs the real CPUID with faulting
// briefly off, clears the feature bits below and resumes after the instruction. Threads
// inherit the setting; exec clears it, and the preload sets it again in the new program.
//
// Cleared with KILN_CPUID_MASK=avx2 (what AVX2-only CPUs such as AMD Zen 2/3 lack):
// AVX-512 (every subset), AVX512_BF16/FP16, AVX-VNNI, AVX-IFMA, AVX-VNNI-INT8, AMX, AVX10.
// Not masked: XGETBV (it cannot trap); libraries check the CPUID bit as well, so the OS
// state bits alone enable nothing. Code that ran CPUID before this constructor (glibc's own
// dispatch, another preload's constructor) keeps what it saw.
//
// On success the constructor sets KILN_CPUID_MASK_ACTIVE=avx2 in the environment, so that a
// program can check the mask took effect; on failure it prints why to stderr and leaves the
// process unmasked (and the variable unset).
#include <asm/prctl.h>
#include <cpuid.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct sigaction g_previous;

// Faulting on: CPUID traps. ARCH_SET_CPUID's argument is "CPUID allowed".
int SetCpuidFaulting(bool on) {
  return static_cast<int>(syscall(SYS_arch_prctl, ARCH_SET_CPUID, on ? 0 : 1));
}

// The bits an AVX2-only CPU does not report, per (leaf, subleaf, register).
void MaskAvx2(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
  enum { A, B, C, D };
  if (leaf == 7 && sub == 0) {
    r[B] &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) |
              (1u << 30) | (1u << 31));  // AVX512F, DQ, IFMA, PF, ER, CD, BW, VL
    r[C] &= ~((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) |
              (1u << 14));  // AVX512_VBMI, VBMI2, VNNI, BITALG, VPOPCNTDQ
    r[D] &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) |
              (1u << 25));  // 4VNNIW, 4FMAPS, VP2INTERSECT, AMX-BF16, AVX512_FP16, AMX-TILE/INT8
  } else if (leaf == 7 && sub == 1) {
    r[A] &= ~((1u << 4) | (1u << 5) | (1u << 23));  // AVX-VNNI, AVX512_BF16, AVX-IFMA
    r[D] &= ~((1u << 4) | (1u << 19));              // AVX-VNNI-INT8, AVX10
  } else if (leaf == 0xd && sub == 0) {
    r[A] &= ~((1u << 5) | (1u << 6) | (1u << 7) | (1u << 17) | (1u << 18));  // k, ZMM, AMX state
  } else if (leaf == 0x1d || leaf == 0x1e || leaf == 0x24) {  // AMX palettes, AVX10 leaf
    r[A] = r[B] = r[C] = r[D] = 0;
  }
}

void OnSegv(int sig, siginfo_t* info, void* context) {
  greg_t* g = static_cast<ucontext_t*>(context)->uc_mcontext.gregs;
  const auto* ip = reinterpret_cast<const unsigned char*>(g[REG_RIP]);
  // A faulting CPUID is a #GP (si_code SI_KERNEL) at a mapped instruction 0F A2; anything
  // else goes to the handler that was there before, or the default action.
  if (info->si_code == SI_KERNEL && ip[0] == 0x0f && ip[1] == 0xa2) {
    const auto leaf = static_cast<uint32_t>(g[REG_RAX]);
    const auto sub = static_cast<uint32_t>(g[REG_RCX]);
    uint32_t r[4];
    const int saved_errno = errno;  // the interrupted code may be between a call and its errno
    SetCpuidFaulting(false);
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
    SetCpuidFaulting(true);
    MaskAvx2(leaf, sub, r);
    g[REG_RAX] = r[0];
    g[REG_RBX] = r[1];
    g[REG_RCX] = r[2];
    g[REG_RDX] = r[3];
    g[REG_RIP] += 2;
    errno = saved_errno;
    return;
  }
  if (g_previous.sa_flags & SA_SIGINFO) {
    g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  } else {
    std::signal(SIGSEGV, SIG_DFL);  // returning re-runs the faulting instruction: default action
  }
}

__attribute__((constructor)) void InstallCpuidMask() {
  const char* want = std::getenv("KILN_CPUID_MASK");
  if (want == nullptr || std::strcmp(want, "avx2") != 0) {
    std::fprintf(stderr, "libkiln_cpuid_mask: KILN_CPUID_MASK=%s is not 'avx2'; not masking\n",
                 want != nullptr ? want : "(unset)");
    return;
  }
  struct sigaction sa {};
  sa.sa_sigaction = OnSegv;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, &g_previous) != 0) {
    std::perror("libkiln_cpuid_mask: sigaction");
    return;
  }
  if (SetCpuidFaulting(true) != 0) {
    std::perror("libkiln_cpuid_mask: arch_prctl(ARCH_SET_CPUID) (no cpuid_fault on this CPU?)");
    sigaction(SIGSEGV, &g_previous, nullptr);
    return;
  }
  setenv("KILN_CPUID_MASK_ACTIVE", "avx2", 1);
}

}  // namespace
