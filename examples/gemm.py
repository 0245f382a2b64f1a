"""The seed example: a 1024^3 fp16 GEMM, traced, lowered and run on the simulated NPU."""

import numpy as np

import pypto


@pypto.kernel
def gemm(A, B):
    return pypto.matmul(A, B)


if __name__ == "__main__":
    with pypto.Context(device_type="npu", device_id=0, target="ascend910b"):
        A = pypto.tensor(np.random.rand(1024, 1024), dtype="float16")
        B = pypto.ones((1024, 1024), dtype="float16")
        C = gemm(A, B)          # traced, lowered to PTO instructions, executed
        C2 = np.dot(A, B)       # the NumPy protocol takes the same path

    expected = A.numpy().astype(np.float32) @ B.numpy().astype(np.float32)
    error = np.abs(C.numpy().astype(np.float32) - expected).max()
    compiled = gemm.lower(A, B)
    print(f"C = A @ B: shape {C.shape}, dtype {C.dtype}, max |error| vs NumPy {error:.3g}")
    print(f"np.dot(A, B) equals gemm(A, B): {np.array_equal(C.numpy(), C2.numpy())}")
    print(f"schedule ({compiled.sources[0]}): {compiled.schedules[0].to_json()}")
    print(f"{compiled.programs[0].num_instructions} PTO instructions over "
          f"{len(compiled.programs[0].cores)} cores; first lines of the assembly:")
    print("\n".join(compiled.asm().splitlines()[:12]))
