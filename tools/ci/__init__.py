"""What the tests and the GPU runner use: the browser and its web assets, gpu_check and its nbval report."""
