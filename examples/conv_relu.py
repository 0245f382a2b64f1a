"""ResNet-50 stage-2 3x3 convolution + ReLU (batch 1, 56x56, 64 -> 64 channels, padding 1,
fp16, NHWC) as one fused kernel: the conv's implicit GEMM with the ReLU in its epilogue."""

import numpy as np

import pypto


@pypto.kernel(fuse={"conv": "relu"})   # explicitly name the fusion pattern
def conv_relu(x, weight):
    conv = pypto.conv2d(x, weight, padding=1)
    return pypto.relu(conv)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x_nchw = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    w_kcrs = (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32)
    # NHWC activations, KRSC weights: the layout the NPU's implicit GEMM reads directly
    x = pypto.tensor(x_nchw.transpose(0, 2, 3, 1), dtype="float16", layout="NHWC")
    w = pypto.tensor(w_kcrs.transpose(0, 2, 3, 1), dtype="float16", layout="NHWC")
    with pypto.Context(device_type="npu", target="ascend910b"):
        y = conv_relu(x, w)

    xs = x.numpy().astype(np.float32)
    ws = w.numpy().astype(np.float32)
    padded = np.pad(xs, ((0, 0), (1, 1), (1, 1), (0, 0)))
    expected = np.zeros((1, 56, 56, 64), np.float32)
    for r in range(3):
        for s in range(3):
            expected += np.einsum("nhwc,kc->nhwk", padded[:, r:r + 56, s:s + 56, :],
                                  ws[:, r, s, :])
    expected = np.maximum(expected, 0)
    compiled = conv_relu.lower(x, w)
    t = compiled.simulate()
    print(f"y: shape {y.shape}, layout {y.layout}, max |error| vs NumPy "
          f"{np.abs(y.numpy().astype(np.float32) - expected).max():.3g}")
    print(f"{len(compiled.workloads)} workload(s), schedule sources {compiled.sources}")
    print(f"simulated time {t.time_us:.2f} us ({t.cycles:,} cycles)")
