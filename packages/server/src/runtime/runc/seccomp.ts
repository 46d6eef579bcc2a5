/**
 * Seccomp filter of every unit: allow by default, refuse (EPERM) the system calls that reach
 * kernel-global state or are common kernel attack surface, following the reasoning of the
 * container engines' default profiles (keyrings, BPF, perf, modules, kexec, clock, swap, handles
 * to host files, io_uring, userfaultfd). OCI runtime spec, config-linux.md "Seccomp".
 */
const DENIED = [
  "acct",
  "add_key",
  "bpf",
  "clock_adjtime",
  "clock_settime",
  "create_module",
  "delete_module",
  "finit_module",
  "get_kernel_syms",
  "get_mempolicy",
  "init_module",
  "io_uring_enter",
  "io_uring_register",
  "io_uring_setup",
  "ioperm",
  "iopl",
  "kcmp",
  "kexec_file_load",
  "kexec_load",
  "keyctl",
  "lookup_dcookie",
  "mbind",
  "move_pages",
  "name_to_handle_at",
  "nfsservctl",
  "open_by_handle_at",
  "perf_event_open",
  "pivot_root",
  "query_module",
  "quotactl",
  "request_key",
  "set_mempolicy",
  "settimeofday",
  "stime",
  "swapoff",
  "swapon",
  "syslog",
  "uselib",
  "userfaultfd",
  "ustat",
  "vm86",
  "vm86old",
];

export interface SeccompProfile {
  defaultAction: string;
  architectures: string[];
  syscalls: { names: string[]; action: string; errnoRet?: number }[];
}

export function seccompProfile(opts: { allowPtrace: boolean }): SeccompProfile {
  const denied = opts.allowPtrace ? DENIED : [...DENIED, "ptrace", "process_vm_readv", "process_vm_writev"];
  return {
    defaultAction: "SCMP_ACT_ALLOW",
    architectures: ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    syscalls: [{ names: denied, action: "SCMP_ACT_ERRNO", errnoRet: 1 }],
  };
}
