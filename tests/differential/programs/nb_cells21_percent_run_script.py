"""The measured cell is `%run train_c21.py --steps 30` of a script the notebook wrote: the script's
loop runs in the user namespace under __name__ == "__main__" with its own sys.argv; its names,
prints and the restored sys.argv as without the magic."""

CELLS = [
    '''
import random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
import textwrap
with open("train_c21.py", "w") as f:
    f.write(textwrap.dedent("""
        import argparse, sys, torch
        from torch import nn
        p = argparse.ArgumentParser(); p.add_argument("--steps", type=int, default=5)
        args = p.parse_args()
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        def main():
            for step in range(args.steps):
                x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad(); loss.backward(); opt.step()
            print("script done", step, sys.argv[1:], __name__)
        if __name__ == "__main__":
            main()
    """))
''',
    '''
%run train_c21.py --steps 30
''',
    '''
import sys
print(args.steps, step if "step" in dir() else None, type(model).__name__, len(sys.argv) > 0)
''',
]
MEASURED = 1
REPORT = "kept"
