"""Publishing a build: the dataset folder, its card and plots, and the upload to the Hub."""
