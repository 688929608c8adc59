"""pytorch/examples time_sequence_prediction shape: LBFGS with a closure that prints loss.item()."""

import torch

torch.set_num_threads(1)
torch.manual_seed(0)
seq = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
criterion = torch.nn.MSELoss()
optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.5, max_iter=5)
inputs, target = torch.randn(256, 8), torch.randn(256, 1)
for i in range(150):
    print("STEP: ", i)

    def closure():
        optimizer.zero_grad()
        loss = criterion(seq(inputs), target)
        print("loss:", loss.item())
        loss.backward()
        return loss

    optimizer.step(closure)
