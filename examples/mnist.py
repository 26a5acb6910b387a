"""PyTorch's MNIST example (pytorch/examples, mnist/main.py: the Net of two convolutions, max
pooling, dropout and two linear layers, trained with Adadelta and StepLR) on kael. The model,
the training and test loops and the options are the example's; what differs is the imports
(kael in place of torch) and the data: torchvision is not a dependency, so the images are
synthetic, 28x28 digits-like classes (a fixed random template per class plus noise), which the
Net learns within an epoch.

    python examples/mnist.py --epochs 1 --train-size 2048
    python examples/mnist.py --dry-run
"""
import argparse

import kael as torch
import kael.nn as nn
import kael.nn.functional as F
import kael.optim as optim
from kael.optim.lr_scheduler import StepLR
from kael.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)} "
                  f"({100.0 * batch_idx / len(train_loader):.0f}%)]\tLoss: {loss.item():.6f}")
            if args.dry_run:
                break


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()  # sum up batch loss
            pred = output.argmax(dim=1, keepdim=True)  # index of the max log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    print(f"\nTest set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{len(test_loader.dataset)} "
          f"({100.0 * correct / len(test_loader.dataset):.0f}%)\n")
    return test_loss, correct


def synthetic_digits(size, templates, generator_seed):
    """(size, 1, 28, 28) images and their labels: class templates plus noise, normalized as
    the example's transforms.Normalize((0.1307,), (0.3081,)) leaves MNIST (mean 0, std about 1)."""
    torch.manual_seed(generator_seed)
    labels = torch.randint(0, 10, (size,))
    images = templates[labels] + 0.8 * torch.randn(size, 1, 28, 28)
    return TensorDataset(images, labels)


def main():
    parser = argparse.ArgumentParser(description="PyTorch's MNIST example on kael")
    parser.add_argument("--batch-size", type=int, default=64, metavar="N",
                        help="input batch size for training (default: 64)")
    parser.add_argument("--test-batch-size", type=int, default=1000, metavar="N",
                        help="input batch size for testing (default: 1000)")
    parser.add_argument("--epochs", type=int, default=14, metavar="N",
                        help="number of epochs to train (default: 14)")
    parser.add_argument("--lr", type=float, default=1.0, metavar="LR", help="learning rate (default: 1.0)")
    parser.add_argument("--gamma", type=float, default=0.7, metavar="M",
                        help="Learning rate step gamma (default: 0.7)")
    parser.add_argument("--no-cuda", action="store_true", default=False, help="disables CUDA training")
    parser.add_argument("--dry-run", action="store_true", default=False, help="quickly check a single pass")
    parser.add_argument("--seed", type=int, default=1, metavar="S", help="random seed (default: 1)")
    parser.add_argument("--log-interval", type=int, default=10, metavar="N",
                        help="how many batches to wait before logging training status")
    parser.add_argument("--save-model", action="store_true", default=False, help="For Saving the current Model")
    # The synthetic data set's sizes (MNIST has 60000 and 10000 images).
    parser.add_argument("--train-size", type=int, default=6000, metavar="N", help="training images (default: 6000)")
    parser.add_argument("--test-size", type=int, default=1000, metavar="N", help="test images (default: 1000)")
    args = parser.parse_args()
    use_cuda = not args.no_cuda and torch.cuda.is_available()

    torch.manual_seed(args.seed)

    device = torch.device("cuda" if use_cuda else "cpu")

    train_kwargs = {"batch_size": args.batch_size}
    test_kwargs = {"batch_size": args.test_batch_size}
    templates = 1.5 * torch.randn(10, 1, 28, 28)
    dataset1 = synthetic_digits(args.train_size, templates, args.seed + 1)
    dataset2 = synthetic_digits(args.test_size, templates, args.seed + 2)
    torch.manual_seed(args.seed)
    train_loader = DataLoader(dataset1, shuffle=True, **train_kwargs)
    test_loader = DataLoader(dataset2, **test_kwargs)

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)

    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()

    if args.save_model:
        torch.save(model.state_dict(), "mnist_cnn.pt")


if __name__ == "__main__":
    main()
