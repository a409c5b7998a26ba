"""The Net builder: op creation, naming, scopes, printing, cloning and lint."""

import pytest

from netbrew.errors import SchemaError, UnknownOperatorError
from netbrew.netdef import BlobReference, Net, device_scope, name_scope


def test_ops_are_created_by_type():
    net = Net("n")
    net.add_external_input("x")
    y = net.Relu("x", "y")
    assert isinstance(y, BlobReference) and y == "y" and y.net is net
    op = net.proto().op[0]
    assert (op.type, list(op.input), list(op.output)) == ("Relu", ["x"], ["y"])


def test_unknown_op_suggests_nearest_names():
    with pytest.raises(UnknownOperatorError, match=r"'Rellu' is not a registered operator.*Relu"):
        Net("n").Rellu("x", "y")
    with pytest.raises(UnknownOperatorError, match=r"Did you mean: .*Conv"):
        Net("n").Convv("x", "y")


def test_arguments_are_stored():
    net = Net("n")
    net.Gemm(["a", "b", "c"], "y", alpha=0.5, transB=1, name="fc1")
    op = net.proto().op[0]
    args = {a.name: a for a in op.arg}
    assert args["alpha"].f == 0.5 and args["transB"].i == 1 and op.name == "fc1"


def test_outputs_are_auto_named_from_a_count():
    net = Net("n")
    single = net.Relu("x")
    first, second = net.Split("x", 2, axis=0)
    third = net.Relu("x", 1)
    assert len({single, first, second, third}) == 4
    assert all(b.startswith("n_") for b in (single, first, third))


def test_blob_reference_chaining():
    net = Net("n")
    x = net.add_external_input("x")[0]
    z = x.Relu([], "y").Sigmoid([], "z")
    assert z == "z"
    assert [(op.type, list(op.input)) for op in net.ops] == [("Relu", ["x"]), ("Sigmoid", ["y"])]
    w = x.Add(["y"], "w")
    assert list(net.ops[-1].input) == ["x", "y"] and w == "w"


def test_external_inputs_and_outputs():
    net = Net("n")
    net.add_external_input("x", "w")
    net.add_external_input("x")
    net.MatMul(["x", "w"], "y")
    net.add_external_output("y")
    assert net.external_inputs == ["x", "w"] and net.external_outputs == ["y"]


def test_name_scope_prefixes_strings_but_not_references():
    net = Net("n")
    x = net.add_external_input("x")[0]
    with name_scope("block1"):
        h = net.Relu(x, "h")
        with name_scope("inner"):
            g = net.Relu(h, "g")
    assert h == "block1/h" and g == "block1/inner/g"
    assert list(net.ops[0].input) == ["x"]
    assert net.Relu("q", "r") == "r"


def test_device_scope_sets_device_option():
    net = Net("n")
    with device_scope("cuda:1"):
        net.Relu("x", "y")
    net.Relu("y", "z")
    first, second = net.ops
    assert first.device_option.device_type == 1 and first.device_option.device_id == 1
    assert not second.HasField("device_option")
    assert "@cuda:1" in str(net)


def test_str_is_one_line_per_op():
    net = Net("mlp")
    net.add_external_input("x", "w", "b")
    h = net.Gemm(["x", "w", "b"], "h", transB=1)
    h.Relu([], "y")
    net.add_external_output("y")
    assert str(net) == ("net mlp(x, w, b) -> (y)\n  h = Gemm(x, w, b, transB=1)\n  y = Relu(h)")


def test_clone_is_deep():
    net = Net("n")
    net.Relu("x", "y")
    copy = net.clone("m")
    copy.Relu("y", "z")
    assert len(net.ops) == 1 and len(copy.ops) == 2 and copy.name == "m" and net.name == "n"


def test_clone_gets_a_fresh_name_and_runs_beside_the_original():
    # char_rnn.py creates both nets in one workspace and runs the clone by its name; a clone
    # that kept the original's name ran the training net instead.
    import numpy as np

    from netbrew.executor import Workspace

    net = Net("clone_src")
    net.Relu("x", "y")
    first, second = net.clone(), net.clone()
    assert len({net.name, first.name, second.name}) == 3
    assert first.name == "clone_src_1" and second.name == "clone_src_2"
    first.Neg("y", "y")
    ws = Workspace()
    ws.feed_blob("x", np.array([-1.0, 2.0], np.float32))
    ws.create_net(net)
    ws.create_net(first)
    ws.run_net(first.name)
    np.testing.assert_array_equal(ws.fetch_blob("y"), [0.0, -2.0])
    with pytest.raises(SchemaError, match="already exists in this workspace"):
        ws.create_net(Net(net.proto()))  # a second net under a taken name stays an error


def test_lint_accepts_a_valid_net():
    net = Net("n")
    net.add_external_input("x")
    net.Relu("x", "x")  # Relu allows in-place
    net.add_external_output("x")
    net.lint()


def test_lint_reports_every_problem():
    net = Net("n")
    net.add_external_input("x")
    net.Relu("undefined", "y")
    net.Gemm(["x"], "g")
    net.MatMul(["x", "x"], "x")
    net.Relu("x", "r", bogus=1)
    net.add_external_output("never")
    with pytest.raises(SchemaError) as info:
        net.lint()
    text = str(info.value)
    assert "5 problem(s)" in text
    assert "op #0 Relu: input 'undefined' was used before it has been defined" in text
    assert "op #1 Gemm: got 1 inputs, expected 2 to 3" in text
    assert "op #2 MatMul: writes input 0 ('x') in place as output 0" in text
    assert "op #3 Relu: unknown argument 'bogus'" in text
    assert "external output 'never' is never produced" in text


def test_caffe2_method_names_on_a_native_net_point_to_netbrews():
    net = Net("native")
    with pytest.raises(AttributeError, match=r"'Proto': did you mean proto\(\)\?"):
        net.Proto()
    with pytest.raises(AttributeError, match="did you mean add_gradient_operators"):
        net.AddGradientOperators(["loss"])
    assert not hasattr(net, "Name")


def test_str_indents_subnets_beneath_their_op():
    from netbrew.netdef import op_def
    from netbrew.proto.netbrew_pb2 import NetDef

    then = NetDef(name="then", external_output=["t"])
    then.op.extend([op_def("Relu", ["x"], ["t"])])
    orelse = NetDef(name="else", external_output=["e"])
    orelse.op.extend([op_def("Neg", ["x"], ["e"])])
    body = NetDef(name="body", external_input=["i", "c", "h"], external_output=["c2", "h2"])
    body.op.extend([op_def("Identity", ["c"], ["c2"])])
    body.op.extend([op_def("If", ["c"], ["h2"], then_branch=then, else_branch=orelse)])
    net = Net("main")
    net.proto().external_input.extend(["x", "n"])
    net.proto().op.extend([op_def("Loop", ["n", "", "x"], ["y"], body=body)])
    assert str(net).splitlines() == [
        "net main(x, n) -> ()",
        "  y = Loop(n, <none>, x, body=<net body: 2 ops>)",
        "    body:",
        "      net body(i, c, h) -> (c2, h2)",
        "        c2 = Identity(c)",
        "        h2 = If(c, then_branch=<net then: 1 ops>, else_branch=<net else: 1 ops>)",
        "          then_branch:",
        "            net then() -> (t)",
        "              t = Relu(x)",
        "          else_branch:",
        "            net else() -> (e)",
        "              e = Neg(x)",
    ]
