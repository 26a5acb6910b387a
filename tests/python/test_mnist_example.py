"""examples/mnist.py, PyTorch's MNIST example on kael with synthetic images: an epoch on a small
set lowers the training loss and classifies the test set, --dry-run stops after one batch, and
--save-model writes a state dict that kael.load reads back into the Net."""
import re
import subprocess
import sys

from conftest import ROOT

EXAMPLE = ROOT / "examples" / "mnist.py"


def run(*args, cwd):
    result = subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=600,
                            cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_an_epoch_lowers_the_loss_and_classifies(tmp_path):
    out = run("--epochs", "1", "--train-size", "640", "--test-size", "200", "--log-interval", "2", "--save-model",
              cwd=tmp_path)
    losses = [float(x) for x in re.findall(r"Loss: ([0-9.]+)", out)]
    assert len(losses) == 5 and losses[-1] < 0.5 * losses[0], out
    correct = int(re.search(r"Accuracy: (\d+)/200", out).group(1))
    assert correct >= 150, out

    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        import kael
        from mnist import Net
        net = Net()
        net.load_state_dict(kael.load(tmp_path / "mnist_cnn.pt"))
    finally:
        sys.path.remove(str(EXAMPLE.parent))


def test_dry_run_stops_after_one_batch(tmp_path):
    out = run("--dry-run", "--epochs", "1", "--train-size", "256", "--test-size", "64", cwd=tmp_path)
    assert len(re.findall(r"Train Epoch", out)) == 1
    assert "Test set" in out
