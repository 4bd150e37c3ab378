"""Library versions, the GPU, and its measured dense bf16 matrix-product rate (the MFU denominator's check)."""

import importlib
import platform
import time

import torch

print(f"python {platform.python_version()} on {platform.machine()}")
for name in ("torch", "triton", "numpy", "tokenizers", "sentencepiece", "transformers", "scipy", "pandas", "typer"):
    try:
        print(f"{name} {importlib.import_module(name).__version__}")
    except ImportError:
        print(f"{name}: not installed")
if torch.cuda.is_available():
    props = torch.cuda.get_device_properties(0)
    print(f"GPU {props.name}, {props.multi_processor_count} SMs, {props.total_memory / 2**30:.1f} GiB, "
          f"CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
    n = 8192
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    print(f"bf16 {n}x{n}x{n} matrix product: {10 * 2 * n**3 / (time.perf_counter() - start) / 1e12:.0f} TFLOP/s")
else:
    print("no CUDA GPU")
