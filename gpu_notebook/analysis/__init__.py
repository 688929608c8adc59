"""Analysis of a recorded run: phases per step, the GPU timeline, top operators."""
