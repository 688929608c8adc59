"""REINFORCE on a numpy cart-pole (unseen round 8): each episode rolls the policy out one env
step at a time (torch.from_numpy, a forward, Categorical sample, .item() handed to env.step),
then one Adam update over the episode. One optimizer step per episode; episodes grow from ~20
to ~200 env steps as the policy learns.

Class: a rollout loop whose "step" is an episode of varying length. The product should say
host-bound (one tiny forward per env step), name the per-step .item() handed to the env as a
needed read (batch the environments), and its profiled window should stand for the run.
Seen 2026-12-05: host-bound and the env-read finding, right; but the window profiled episodes
2-4 (8 ms each) while the median episode took 212 ms (the run's tenths 144-361 ms): phases and
the GPU estimate are those of the short early episodes (open)."""

import math

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
rng = np.random.default_rng(0)


class CartPole:
    def reset(self):
        self.s = rng.uniform(-0.05, 0.05, 4)
        self.t = 0
        return self.s.astype(np.float32)

    def step(self, a):
        x, xd, th, thd = self.s
        f = 10.0 if a == 1 else -10.0
        ct, st = math.cos(th), math.sin(th)
        tmp = (f + 0.05 * thd * thd * st) / 1.1
        tha = (9.8 * st - ct * tmp) / (0.5 * (4.0 / 3.0 - 0.1 * ct * ct / 1.1))
        xa = tmp - 0.05 * tha * ct / 1.1
        self.s = np.array([x + 0.02 * xd, xd + 0.02 * xa, th + 0.02 * thd, thd + 0.02 * tha])
        self.t += 1
        done = abs(self.s[0]) > 2.4 or abs(self.s[2]) > 0.21 or self.t >= 200
        return self.s.astype(np.float32), 1.0, done


policy = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
env = CartPole()
for episode in range(120):
    obs = env.reset()
    log_probs, rewards = [], []
    done = False
    while not done:
        logits = policy(torch.from_numpy(obs))
        dist = torch.distributions.Categorical(logits=logits)
        a = dist.sample()
        log_probs.append(dist.log_prob(a))
        obs, r, done = env.step(a.item())
        rewards.append(r)
    g, returns = 0.0, []
    for r in reversed(rewards):
        g = r + 0.99 * g
        returns.insert(0, g)
    ret = torch.tensor(returns)
    ret = (ret - ret.mean()) / (ret.std() + 1e-8)
    loss = -(torch.stack(log_probs) * ret).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if episode % 50 == 0:
        print(f"episode {episode} length {len(rewards)}")
