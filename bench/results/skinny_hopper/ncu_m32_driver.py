import numpy as np, torch
from ptxforge.schedules.hopper import HopperGemm
from ptxforge.schedules.hopper.config import SKINNY_S4_32
g = HopperGemm("s4", **SKINNY_S4_32)
M, N, K = 32, 8192, 8192
ws = [torch.randint(0, 256, (N, K // 2), dtype=torch.uint8, device="cuda") for _ in range(4)]
a = torch.randint(0, 256, (M, K // 2), dtype=torch.uint8, device="cuda")
c = torch.empty((M, N), dtype=torch.int32, device="cuda")
for i in range(12):
    g.run(a, ws[i % 4], c)
torch.cuda.synchronize()
print("ok")
