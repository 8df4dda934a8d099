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
// The handler must stay the process's SIGSEGV handler: this library also defines sigaction
// and signal, and a SIGSEGV handler the program installs later (Python's faulthandler, a
// crash reporter) is kept as the next handler, which every other SIGSEGV reaches.
//
// Cleared with KILN_CPUID_MASK=avx2 (what AVX2-only CPUs such as AMD Zen 2/3 lack):
// AVX-512 (every subset), AVX512_BF16/FP16, AVX-VNNI (and its INT8/INT16 forms), AVX-IFMA,
// AVX-NE-CONVERT, AMX (every subset), AVX10. Not masked: XGETBV and the XSAVE leaf 0xD (the
// OS state; libraries check the CPUID feature bit as well, so the state bits alone enable
// nothing, and an XSAVE area sized from them stays right).
//
// Limits: code that ran CPUID before this constructor keeps what it saw: glibc's own dispatch
// and ifunc resolvers, and the constructors of the program's own shared libraries, which run
// before a preload's. The libraries kiln and onnxruntime use detect the CPU on first use
// (oneDNN, MLAS, libgcc's __builtin_cpu_supports in the executable), after it.
//
// On success the constructor sets KILN_CPUID_MASK_ACTIVE=avx2 in the environment, so that a
// program can check the mask took effect; on failure it prints why to stderr and leaves the
// process unmasked (and the variable unset, whatever the parent had).
#include <asm/prctl.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
using SignalFn = sighandler_t (*)(int, sighandler_t);

// The C library's own sigaction and signal, behind this library's definitions below.
SigactionFn RealSigaction() {
  static const auto f = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "sigaction"));
  return f;
}
SignalFn RealSignal() {
  static const auto f = reinterpret_cast<SignalFn>(dlsym(RTLD_NEXT, "signal"));
  return f;
}

bool g_installed = false;      // OnSegv is the SIGSEGV handler
struct sigaction g_next = {};  // what the program asked for: every SIGSEGV but CPUID's

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
    r[A] &= ~((1u << 4) | (1u << 5) | (1u << 21) |
              (1u << 23));  // AVX-VNNI, AVX512_BF16, AMX-FP16, AVX-IFMA
    r[D] &= ~((1u << 4) | (1u << 5) | (1u << 8) | (1u << 10) |
              (1u << 19));  // AVX-VNNI-INT8, AVX-NE-CONVERT, AMX-COMPLEX, AVX-VNNI-INT16, AVX10
  } else if (leaf == 0x1d || leaf == 0x1e || leaf == 0x24) {  // AMX palettes, AVX10 leaf
    r[A] = r[B] = r[C] = r[D] = 0;
  }
}

// Hands a SIGSEGV that is not a CPUID fault to the program's handler, or to the default
// action: for a fault, returning re-runs the faulting instruction with SIGSEGV at its
// default; a SIGSEGV sent by kill/raise (si_code <= 0) is raised again.
void PassOn(int sig, siginfo_t* info, void* context) {
  const struct sigaction next = g_next;
  if (next.sa_flags & SA_RESETHAND) g_next = {};
  if ((next.sa_flags & SA_SIGINFO) && next.sa_sigaction != nullptr) {
    next.sa_sigaction(sig, info, context);
    return;
  }
  if (next.sa_handler == SIG_IGN && info->si_code <= 0) return;
  if (next.sa_handler != SIG_DFL && next.sa_handler != SIG_IGN) {
    next.sa_handler(sig);
    return;
  }
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  RealSigaction()(SIGSEGV, &dfl, nullptr);
  g_installed = false;
  if (info->si_code <= 0) raise(sig);
}

void OnSegv(int sig, siginfo_t* info, void* context) {
  greg_t* g = static_cast<ucontext_t*>(context)->uc_mcontext.gregs;
  const auto* ip = reinterpret_cast<const unsigned char*>(g[REG_RIP]);
  // A faulting CPUID is a #GP (si_code SI_KERNEL) at the instruction 0F A2, which the CPU
  // has just fetched, so reading it cannot fault.
  if (info->si_code != SI_KERNEL || ip[0] != 0x0f || ip[1] != 0xa2) {
    PassOn(sig, info, context);
    return;
  }
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
}

__attribute__((constructor)) void InstallCpuidMask() {
  unsetenv("KILN_CPUID_MASK_ACTIVE");  // set again below only if this process is masked
  const char* want = std::getenv("KILN_CPUID_MASK");
  if (want == nullptr || std::strcmp(want, "avx2") != 0) {
    std::fprintf(stderr, "libkiln_cpuid_mask: KILN_CPUID_MASK=%s is not 'avx2'; not masking\n",
                 want != nullptr ? want : "(unset)");
    return;
  }
  if (RealSigaction() == nullptr || RealSignal() == nullptr) {
    std::fprintf(stderr, "libkiln_cpuid_mask: no sigaction/signal behind the preload: %s\n",
                 dlerror());
    return;
  }
  struct sigaction sa = {};
  sa.sa_sigaction = OnSegv;
  // Every other signal blocked while CPUID runs unmasked; SA_NODEFER so a fault in a handler
  // the program installed still reaches it; the alternate stack where the program set one.
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigfillset(&sa.sa_mask);
  sigdelset(&sa.sa_mask, SIGSEGV);
  if (RealSigaction()(SIGSEGV, &sa, &g_next) != 0) {
    std::perror("libkiln_cpuid_mask: sigaction");
    return;
  }
  g_installed = true;
  if (SetCpuidFaulting(true) != 0) {
    std::perror("libkiln_cpuid_mask: arch_prctl(ARCH_SET_CPUID) (no cpuid_fault on this CPU?)");
    RealSigaction()(SIGSEGV, &g_next, nullptr);
    g_installed = false;
    return;
  }
  setenv("KILN_CPUID_MASK_ACTIVE", "avx2", 1);
}

}  // namespace

// The program's view of SIGSEGV while the mask is installed: it reads and sets g_next, and
// OnSegv stays the kernel's handler. Every other signal, and SIGSEGV without the mask, goes
// straight to the C library.
extern "C" int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (sig != SIGSEGV || !g_installed) return RealSigaction()(sig, act, old);
  if (old != nullptr) *old = g_next;
  if (act != nullptr) g_next = *act;
  return 0;
}

extern "C" sighandler_t signal(int sig, sighandler_t handler) {
  if (sig != SIGSEGV || !g_installed) return RealSignal()(sig, handler);
  const sighandler_t old =
      (g_next.sa_flags & SA_SIGINFO)
          ? reinterpret_cast<sighandler_t>(reinterpret_cast<void (*)()>(g_next.sa_sigaction))
          : g_next.sa_handler;
  g_next = {};
  g_next.sa_handler = handler;
  g_next.sa_flags = SA_RESTART;
  return old;
}
