"""A port of Caffe2's char_rnn.py example (caffe2/python/examples), run unchanged in its
Caffe2 calls under `python -m netbrew.caffe2`: an LSTM learns to predict the next
character of a text. Data loading is the one change: the text comes from --train_data as
before, and the test writes a synthetic one. --iters bounds the run (the original looped
forever) and the script prints the unigram loss and its final smoothed loss."""

import argparse

import numpy as np
from caffe2.proto import caffe2_pb2
from caffe2.python import brew, core, model_helper, utils, workspace
from caffe2.python.optimizer import build_sgd
from caffe2.python.rnn_cell import LSTM


def create_net_once(net, created=set()):  # noqa: B006  (a set shared across calls, as upstream)
    if net.Name() not in created:
        created.add(net.Name())
        workspace.CreateNet(net)


class CharRNN:
    def __init__(self, args):
        self.seq_length, self.batch_size = args.seq_length, args.batch_size
        self.hidden_size = args.hidden_size
        with open(args.train_data) as f:
            self.text = f.read()
        self.vocab = sorted(set(self.text))
        self.char_to_idx = {ch: i for i, ch in enumerate(self.vocab)}
        self.D = len(self.vocab)

    def create_model(self):
        model = model_helper.ModelHelper(name="char_rnn")
        input_blob, seq_lengths, hidden_init, cell_init, target = model.net.AddExternalInputs(
            "input_blob", "seq_lengths", "hidden_init", "cell_init", "target"
        )
        hidden_all, self.hidden_output, _, self.cell_state = LSTM(
            model,
            input_blob,
            seq_lengths,
            (hidden_init, cell_init),
            self.D,
            self.hidden_size,
            scope="LSTM",
        )
        output = brew.fc(model, hidden_all, None, dim_in=self.hidden_size, dim_out=self.D,
                         axis=2)  # fmt: skip
        softmax = model.net.Softmax(output, "softmax", axis=2)
        softmax_reshaped, _ = model.net.Reshape(softmax, ["softmax_reshaped", "_"],
                                                shape=[-1, self.D])  # fmt: skip
        # The forward pass for generation: the net so far, without loss and backward ops.
        self.forward_net = core.Net(model.net.Proto())
        xent = model.net.LabelCrossEntropy([softmax_reshaped, target], "xent")
        loss = model.net.AveragedLoss(xent, "loss")
        model.AddGradientOperators([loss])
        build_sgd(model, base_learning_rate=0.1 * self.seq_length, policy="step", stepsize=1,
                  gamma=0.9999)  # fmt: skip
        self.model, self.predictions, self.loss = model, softmax, loss
        self.prepare_state = core.Net("prepare_state")
        self.prepare_state.Copy(self.hidden_output, hidden_init)
        self.prepare_state.Copy(self.cell_state, cell_init)

    def batch(self, positions, starts, sizes):
        x = np.zeros([self.seq_length, self.batch_size, self.D], np.float32)
        y = np.zeros([self.seq_length * self.batch_size], np.int32)
        for e in range(self.batch_size):
            for i in range(self.seq_length):
                pos = starts[e] + positions[e]
                x[i, e, self.char_to_idx[self.text[pos]]] = 1
                y[i * self.batch_size + e] = self.char_to_idx[self.text[(pos + 1) % len(self.text)]]
                positions[e] = (positions[e] + 1) % sizes[e]
        return x, y

    def train(self, iters):
        workspace.RunNetOnce(self.model.param_init_net)
        n = len(self.text)
        counts = np.bincount([self.char_to_idx[c] for c in self.text], minlength=self.D)
        unigram = -np.sum(counts / n * np.log(counts / n)) * self.seq_length
        smooth_loss = -np.log(1.0 / self.D) * self.seq_length
        positions = np.zeros(self.batch_size, np.int32)
        size = n // self.batch_size
        starts, sizes = list(range(0, n, size)), [size] * self.batch_size
        sizes[-1] += n % self.batch_size
        state = np.zeros([1, self.batch_size, self.hidden_size], np.float32)
        workspace.FeedBlob(self.hidden_output, state)
        workspace.FeedBlob(self.cell_state, state)
        workspace.CreateNet(self.prepare_state)
        for _ in range(iters):
            workspace.FeedBlob("seq_lengths", np.full(self.batch_size, self.seq_length, np.int32))
            workspace.RunNet(self.prepare_state.Name())
            x, y = self.batch(positions, starts, sizes)
            workspace.FeedBlob("input_blob", x)
            workspace.FeedBlob("target", y)
            create_net_once(self.model.net)
            workspace.RunNet(self.model.net.Name())
            loss = workspace.FetchBlob(self.loss) * self.seq_length
            smooth_loss = 0.99 * smooth_loss + 0.01 * loss
        print(f"unigram loss: {unigram:.4f}")
        print(f"smooth loss: {smooth_loss:.4f}")

    def generate(self, num_characters, ch):
        create_net_once(self.forward_net)
        text = ch
        for _ in range(num_characters):
            workspace.FeedBlob("seq_lengths", np.ones(self.batch_size, np.int32))
            workspace.RunNet(self.prepare_state.Name())
            x = np.zeros([1, self.batch_size, self.D], np.float32)
            x[0, 0, self.char_to_idx[ch]] = 1
            workspace.FeedBlob("input_blob", x)
            workspace.RunNet(self.forward_net.Name())
            p = workspace.FetchBlob(self.predictions)[0][0].astype(np.float64)
            ch = self.vocab[np.random.choice(self.D, p=p / p.sum())]
            text += ch
        print(f"generated: {text!r}")


@utils.debug
def main():
    parser = argparse.ArgumentParser(description="Caffe2: Char RNN Training")
    parser.add_argument("--train_data", type=str, required=True)
    parser.add_argument("--seq_length", type=int, default=25)
    parser.add_argument("--batch_size", type=int, default=1)
    parser.add_argument("--hidden_size", type=int, default=100)
    parser.add_argument("--iters", type=int, default=500)
    parser.add_argument("--gpu", action="store_true")
    args = parser.parse_args()
    np.random.seed(0)
    device = core.DeviceOption(workspace.GpuDeviceType if args.gpu else caffe2_pb2.CPU, 0)
    with core.DeviceScope(device):
        rnn = CharRNN(args)
        rnn.create_model()
        rnn.train(args.iters)
        rnn.generate(60, rnn.text[0])


if __name__ == "__main__":
    workspace.GlobalInit(["caffe2", "--caffe2_log_level=2"])
    main()
