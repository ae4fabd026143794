"""Peak-RSS helpers shared by the memory benchmarks (bench/mi_memory.py, bench/update_memory.py): Linux /proc only."""


def status_kib(field: str) -> int:
    "A memory field of /proc/self/status, in KiB."
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"): return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_peak() -> bool:
    "Reset VmHWM (peak RSS) to the current RSS; False where the kernel does not allow it."
    try:
        with open("/proc/self/clear_refs", "w") as f: f.write("5")
        return True
    except OSError:
        return False
