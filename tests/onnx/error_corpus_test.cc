// The importer's error corpus: one malformed or unsupported model per row, each with the
// exact status code and a message substring it must produce (naming the node, op and
// opset where a node is involved). Habit borrowed from Halide's test/error folder: one
// failing input per diagnosable mistake.
#include <functional>

#include "gtest/gtest.h"
#include "tests/onnx/onnx_test_util.h"

namespace kiln {
namespace {

using namespace kiln::testing;  // NOLINT
using absl::StatusCode;
using onnx::TensorProto;

struct Case {
  std::string name;
  std::function<std::string()> build;  // serialized model bytes
  StatusCode code;
  std::string message;  // substring the error must contain
  ImportOptions options = {};
};

// x: f32[2,3] -> Relu (node 'relu') -> y. Most cases start here and break one thing.
onnx::ModelProto Base(int64_t opset = 17) {
  onnx::ModelProto m = MakeModel(opset);
  AddInput(m, "x");
  AddNode(m, "Relu", {"x"}, {"y"}, "relu");
  AddOutput(m, "y");
  return m;
}

// Base plus an initializer "w" shaped by the caller; `fill` breaks it.
std::string WithInit(const std::function<void(TensorProto*)>& fill) {
  onnx::ModelProto m = Base();
  TensorProto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(TensorProto::FLOAT);
  fill(t);
  return Serialize(m);
}

// Base plus a node built by the caller (its output is not consumed).
std::string WithNode(const std::function<void(onnx::ModelProto&)>& add, int64_t opset = 17) {
  onnx::ModelProto m = Base(opset);
  add(m);
  return Serialize(m);
}

std::string Truncated() {
  onnx::ModelProto m = Base();
  AddInitF32(m, "w", {64}, std::vector<float>(64, 1.f));
  std::string s = Serialize(m);
  return s.substr(0, s.size() - 37);
}

std::vector<Case> Corpus() {
  std::vector<Case> c;
  // --- bytes and model-level structure
  c.push_back({"empty_bytes", [] { return std::string(); }, StatusCode::kInvalidArgument,
               "model bytes are empty"});
  c.push_back({"random_bytes", [] { return std::string("\xff\xfe\x07garbage\x01\x02", 13); },
               StatusCode::kInvalidArgument, "cannot parse ModelProto"});
  c.push_back(
      {"truncated_bytes", Truncated, StatusCode::kInvalidArgument, "cannot parse ModelProto"});
  c.push_back({"no_graph",
               [] {
                 auto m = Base();
                 m.clear_graph();
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument, "model has no graph"});
  c.push_back({"no_default_opset",
               [] {
                 auto m = Base();
                 m.mutable_opset_import(0)->set_domain("com.microsoft");
                 return Serialize(m);
               },
               StatusCode::kUnimplemented,
               "no opset_import for the default ONNX domain, only for: com.microsoft"});
  c.push_back({"no_opset_import_at_all",
               [] {
                 auto m = Base();
                 m.clear_opset_import();
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument, "no opset_import for the default ONNX domain"});
  c.push_back({"two_default_opsets",
               [] {
                 auto m = Base();
                 auto* o = m.add_opset_import();
                 o->set_domain("ai.onnx");
                 o->set_version(15);
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument, "default ONNX domain twice (opsets 17 and 15)"});
  c.push_back({"opset_too_old", [] { return Serialize(Base(6)); }, StatusCode::kUnimplemented,
               "opset 6 is not supported (kiln imports default-domain opsets 7 to 27)"});
  c.push_back({"opset_too_new", [] { return Serialize(Base(28)); }, StatusCode::kUnimplemented,
               "opset 28 is not supported"});
  c.push_back({"too_many_nodes", [] { return Serialize(Base()); }, StatusCode::kInvalidArgument,
               "model has 2 nodes, initializers and inputs; the limit is 1",
               ImportOptions{.max_nodes = 1}});
  c.push_back({"no_outputs",
               [] {
                 auto m = Base();
                 m.mutable_graph()->clear_output();
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument, "graph has no outputs"});
  // --- unsupported ops (one error listing all of them)
  c.push_back({"unsupported_ops_listed_together",
               [] {
                 auto m = Base();
                 AddNode(m, "Loop", {}, {"l"}, "loop_1");
                 AddNode(m, "TfIdfVectorizer", {"x"}, {"n1"}, "tfidf_a");
                 AddNode(m, "TfIdfVectorizer", {"x"}, {"n2"}, "tfidf_b");
                 return Serialize(m);
               },
               StatusCode::kUnimplemented,
               "unsupported ops: Loop (node 'loop_1'), TfIdfVectorizer (2 nodes: 'tfidf_a', "
               "'tfidf_b') at opset 17"});
  c.push_back({"custom_domain_op",
               [] {
                 return WithNode([](auto& m) {
                   AddNode(m, "QAttention", {"x", "x"}, {"f"}, "qa")->set_domain("com.microsoft");
                 });
               },
               StatusCode::kUnimplemented,
               "unsupported ops: com.microsoft.QAttention (node 'qa') at opset 17"});
  c.push_back({"op_newer_than_model_opset",
               [] { return WithNode([](auto& m) { AddNode(m, "Gelu", {"x"}, {"g"}, "gelu"); }); },
               StatusCode::kUnimplemented,
               "unsupported ops: Gelu [kiln needs opset >= 20] (node 'gelu') at opset 17"});
  c.push_back({"ir_internal_input_op",
               [] { return WithNode([](auto& m) { AddNode(m, "Input", {}, {"i"}); }); },
               StatusCode::kUnimplemented, "unsupported ops: Input (node 'Input_1')"});
  // --- graph structure
  c.push_back({"cycle",
               [] {
                 auto m = MakeModel();
                 AddInput(m, "x");
                 AddNode(m, "Add", {"x", "b"}, {"a"}, "n_a");
                 AddNode(m, "Relu", {"a"}, {"b"}, "n_b");
                 AddOutput(m, "b");
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument,
               "graph has a cycle through node 'n_a' (Add, opset 17)"});
  c.push_back({"self_loop",
               [] {
                 auto m = MakeModel();
                 AddInput(m, "x");
                 AddNode(m, "Add", {"x", "s"}, {"s"}, "selfish");
                 AddOutput(m, "s");
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument, "cycle through node 'selfish' (Add, opset 17)"});
  c.push_back(
      {"undefined_input",
       [] { return WithNode([](auto& m) { AddNode(m, "Neg", {"nowhere"}, {"n"}, "neg"); }); },
       StatusCode::kInvalidArgument,
       "node 'neg' (Neg, opset 17) input 0 'nowhere' is not defined by any node, graph "
       "input or initializer"});
  c.push_back({"value_defined_twice_by_nodes",
               [] { return WithNode([](auto& m) { AddNode(m, "Neg", {"x"}, {"y"}, "dup"); }); },
               StatusCode::kInvalidArgument,
               "node 'dup' (Neg, opset 17) defines value 'y', which is already defined by node "
               "'relu' (Relu, opset 17)"});
  c.push_back({"node_output_shadows_input",
               [] { return WithNode([](auto& m) { AddNode(m, "Neg", {"y"}, {"x"}, "shadow"); }); },
               StatusCode::kInvalidArgument,
               "node 'shadow' (Neg, opset 17) defines value 'x', which is already defined by "
               "graph input 'x'"});
  c.push_back({"node_output_shadows_initializer",
               [] {
                 return WithNode([](auto& m) {
                   AddInitF32(m, "w", {1}, {1});
                   AddNode(m, "Neg", {"y"}, {"w"}, "shadow_w");
                 });
               },
               StatusCode::kInvalidArgument,
               "node 'shadow_w' (Neg, opset 17) defines value 'w', which is already defined by "
               "initializer 'w'"});
  c.push_back({"duplicate_initializer",
               [] {
                 auto m = Base();
                 AddInitF32(m, "w", {1}, {1});
                 AddInitF32(m, "w", {1}, {2});
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument, "initializer 'w' is defined twice"});
  c.push_back({"unnamed_initializer",
               [] {
                 auto m = Base();
                 AddInitF32(m, "", {1}, {1});
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument, "an initializer has no name"});
  c.push_back({"duplicate_graph_input",
               [] {
                 auto m = Base();
                 AddInput(m, "x");
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument, "graph input 'x' is declared twice"});
  c.push_back({"graph_output_not_produced",
               [] {
                 auto m = Base();
                 AddOutput(m, "ghost");
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument,
               "graph output 'ghost' is not produced by any node, graph input or initializer"});
  c.push_back({"duplicate_graph_output",
               [] {
                 auto m = Base();
                 AddOutput(m, "y");
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument, "graph output 'y' is declared twice"});
  c.push_back({"input_initializer_dtype_mismatch",
               [] {
                 auto m = Base();
                 AddInput(m, "w", TensorProto::INT64, {"1"});
                 AddInitF32(m, "w", {1}, {1});
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument,
               "graph input 'w' declares element type 7 but its initializer is f32"});
  // --- graph input types
  c.push_back({"input_without_type",
               [] {
                 auto m = Base();
                 m.mutable_graph()->mutable_input(0)->clear_type();
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument, "graph input 'x' has no type"});
  c.push_back({"input_without_elem_type",
               [] {
                 auto m = Base();
                 m.mutable_graph()
                     ->mutable_input(0)
                     ->mutable_type()
                     ->mutable_tensor_type()
                     ->clear_elem_type();
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument, "graph input 'x' has no element type"});
  c.push_back(
      {"input_unknown_elem_type",
       [] {
         auto m = Base();
         m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
             77);
         return Serialize(m);
       },
       StatusCode::kInvalidArgument, "graph input 'x': unknown data type code 77"});
  c.push_back(
      {"input_string_elem_type",
       [] {
         auto m = Base();
         m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
             TensorProto::STRING);
         return Serialize(m);
       },
       StatusCode::kUnimplemented, "graph input 'x': data type STRING (8)"});
  c.push_back({"input_negative_dim",
               [] {
                 auto m = Base();
                 m.mutable_graph()
                     ->mutable_input(0)
                     ->mutable_type()
                     ->mutable_tensor_type()
                     ->mutable_shape()
                     ->mutable_dim(1)
                     ->set_dim_value(-3);
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument, "graph input 'x': dimension 1 is negative (-3)"});
  c.push_back({"input_rank_over_limit",
               [] {
                 auto m = MakeModel();
                 AddInput(m, "x", TensorProto::FLOAT, std::vector<std::string>(17, "1"));
                 AddNode(m, "Relu", {"x"}, {"y"}, "relu");
                 AddOutput(m, "y");
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument,
               "graph input 'x': rank 17 exceeds the limit of 16 (ImportOptions.max_rank)"});
  c.push_back(
      {"input_sequence_type",
       [] {
         auto m = Base();
         auto* t = m.mutable_graph()->mutable_input(0)->mutable_type();
         t->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
         return Serialize(m);
       },
       StatusCode::kUnimplemented, "graph input 'x': only tensor types are supported"});
  c.push_back(
      {"output_unknown_elem_type",
       [] {
         auto m = Base();
         m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
             1000);
         return Serialize(m);
       },
       StatusCode::kInvalidArgument, "graph output 'y': unknown data type code 1000"});
  // --- tensors
  c.push_back({"tensor_unknown_dtype",
               [] { return WithInit([](TensorProto* t) { t->set_data_type(42); }); },
               StatusCode::kInvalidArgument, "initializer 'w': unknown data type code 42"});
  c.push_back({"tensor_undefined_dtype",
               [] { return WithInit([](TensorProto* t) { t->set_data_type(0); }); },
               StatusCode::kInvalidArgument, "initializer 'w': data type is UNDEFINED (0)"});
  c.push_back({"tensor_no_dtype",
               [] { return WithInit([](TensorProto* t) { t->clear_data_type(); }); },
               StatusCode::kInvalidArgument, "initializer 'w': tensor has no data_type"});
  c.push_back({"tensor_string",
               [] {
                 return WithInit([](TensorProto* t) {
                   t->set_data_type(TensorProto::STRING);
                   t->add_string_data("hi");
                 });
               },
               StatusCode::kUnimplemented,
               "initializer 'w': data type STRING (8) is not supported by kiln"});
  c.push_back({"tensor_complex",
               [] { return WithInit([](TensorProto* t) { t->set_data_type(14); }); },
               StatusCode::kUnimplemented, "data type COMPLEX64 (14) is not supported"});
  c.push_back({"tensor_negative_dim",
               [] {
                 return WithInit([](TensorProto* t) {
                   t->add_dims(2);
                   t->add_dims(-1);
                 });
               },
               StatusCode::kInvalidArgument, "initializer 'w': dimension 1 is negative (-1)"});
  c.push_back({"tensor_overflowing_dims",
               [] {
                 return WithInit([](TensorProto* t) {
                   for (int i = 0; i < 3; ++i) t->add_dims(int64_t{1} << 30);
                 });
               },
               StatusCode::kInvalidArgument, "initializer 'w': element count overflows int64"});
  c.push_back({"tensor_over_byte_limit",
               [] {
                 return WithInit([](TensorProto* t) {
                   t->add_dims(int64_t{1} << 40);  // 4 TiB, no data: must not allocate
                 });
               },
               StatusCode::kInvalidArgument,
               "initializer 'w': tensor of 4398046511104 bytes exceeds the limit of 8589934592 "
               "bytes (ImportOptions.max_tensor_bytes)"});
  c.push_back({"tensors_over_total_limit",
               [] {
                 auto m = Base();
                 AddInitF32(m, "a", {4}, {1, 2, 3, 4});
                 AddInitF32(m, "b", {4}, {1, 2, 3, 4});
                 return Serialize(m);
               },
               StatusCode::kInvalidArgument,
               "initializer 'b': tensors total more than 20 bytes (ImportOptions.max_total_bytes)",
               ImportOptions{.max_total_bytes = 20}});
  c.push_back({"tensor_rank_over_limit",
               [] {
                 return WithInit([](TensorProto* t) {
                   for (int i = 0; i < 5; ++i) t->add_dims(1);
                   t->add_float_data(1);
                 });
               },
               StatusCode::kInvalidArgument, "initializer 'w': rank 5 exceeds the limit of 4",
               ImportOptions{.max_rank = 4}});
  c.push_back({"raw_data_size_mismatch",
               [] {
                 return WithInit([](TensorProto* t) {
                   t->add_dims(3);
                   t->set_raw_data(std::string(11, '\0'));
                 });
               },
               StatusCode::kInvalidArgument,
               "initializer 'w': raw_data has 11 bytes, expected 12 (3 x f32)"});
  c.push_back({"float_data_count_mismatch",
               [] {
                 return WithInit([](TensorProto* t) {
                   t->add_dims(3);
                   t->add_float_data(1);
                   t->add_float_data(2);
                 });
               },
               StatusCode::kInvalidArgument,
               "initializer 'w': float_data has 2 values, expected 3"});
  c.push_back(
      {"tensor_without_data", [] { return WithInit([](TensorProto* t) { t->add_dims(2); }); },
       StatusCode::kInvalidArgument, "initializer 'w': float_data has 0 values, expected 2"});
  c.push_back({"values_in_wrong_typed_field",
               [] {
                 return WithInit([](TensorProto* t) {
                   t->add_dims(1);
                   t->add_int64_data(1);
                 });
               },
               StatusCode::kInvalidArgument, "f32 values must be in float_data"});
  c.push_back({"raw_and_typed_data",
               [] {
                 return WithInit([](TensorProto* t) {
                   t->add_dims(1);
                   t->add_float_data(1);
                   t->set_raw_data(std::string(4, '\0'));
                 });
               },
               StatusCode::kInvalidArgument, "both raw_data and a typed data field are set"});
  c.push_back({"int32_data_out_of_range_for_u8",
               [] {
                 return WithInit([](TensorProto* t) {
                   t->set_data_type(TensorProto::UINT8);
                   t->add_dims(1);
                   t->add_int32_data(300);
                 });
               },
               StatusCode::kInvalidArgument, "int32_data[0] = 300 is out of range for u8"});
  c.push_back({"segmented_tensor",
               [] {
                 return WithInit([](TensorProto* t) {
                   t->mutable_segment()->set_begin(0);
                   t->mutable_segment()->set_end(1);
                 });
               },
               StatusCode::kUnimplemented, "initializer 'w': segmented tensors are not supported"});
  c.push_back({"external_data_without_model_dir",
               [] {
                 return WithInit([](TensorProto* t) {
                   t->add_dims(1);
                   t->set_data_location(TensorProto::EXTERNAL);
                   auto* e = t->add_external_data();
                   e->set_key("location");
                   e->set_value("w.bin");
                 });
               },
               StatusCode::kInvalidArgument, "initializer 'w': external data: not allowed"});
  c.push_back({"sparse_initializer",
               [] {
                 auto m = Base();
                 m.mutable_graph()->add_sparse_initializer()->mutable_values()->set_name("sp");
                 return Serialize(m);
               },
               StatusCode::kUnimplemented, "sparse initializer 'sp' is not supported"});
  // --- node arity and attributes
  c.push_back({"too_few_inputs",
               [] { return WithNode([](auto& m) { AddNode(m, "Add", {"x"}, {"a"}, "add1"); }); },
               StatusCode::kInvalidArgument,
               "node 'add1' (Add, opset 17) has 1 inputs; expected 2"});
  c.push_back(
      {"too_many_inputs",
       [] {
         return WithNode([](auto& m) { AddNode(m, "Gemm", {"x", "x", "x", "x"}, {"a"}, "g4"); });
       },
       StatusCode::kInvalidArgument, "node 'g4' (Gemm, opset 17) has 4 inputs; expected 2 to 3"});
  c.push_back(
      {"too_many_outputs",
       [] { return WithNode([](auto& m) {
              AddNode(m, "Relu", {"x"}, {"a", "b"}, "r2");
            }); },
       StatusCode::kInvalidArgument, "node 'r2' (Relu, opset 17) has 2 outputs; expected 1"});
  c.push_back({"no_outputs_on_node",
               [] { return WithNode([](auto& m) { AddNode(m, "Relu", {"x"}, {""}, "r0"); }); },
               StatusCode::kInvalidArgument,
               "node 'r0' (Relu, opset 17) has 0 outputs; expected 1"});
  c.push_back({"required_input_empty",
               [] {
                 return WithNode([](auto& m) { AddNode(m, "Gather", {"", "x"}, {"a"}, "gth"); });
               },
               StatusCode::kInvalidArgument,
               "node 'gth' (Gather, opset 17) input 0 is required but its name is empty"});
  c.push_back({"subgraph_attribute",
               [] {
                 return WithNode([](auto& m) {
                   auto* n = AddNode(m, "Neg", {"x"}, {"a"}, "with_body");
                   auto* a = n->add_attribute();
                   a->set_name("body");
                   a->set_type(onnx::AttributeProto::GRAPH);
                   a->mutable_g()->set_name("sub");
                 });
               },
               StatusCode::kUnimplemented,
               "node 'with_body' (Neg, opset 17) attribute 'body': subgraph attributes are not "
               "supported"});
  c.push_back({"duplicate_attribute",
               [] {
                 return WithNode([](auto& m) {
                   auto* n = AddNode(m, "Softmax", {"x"}, {"a"}, "sm");
                   AttrInt(n, "axis", 1);
                   AttrInt(n, "axis", 0);
                 });
               },
               StatusCode::kInvalidArgument,
               "node 'sm' (Softmax, opset 17) has attribute 'axis' twice"});
  c.push_back({"attribute_without_type_or_value",
               [] {
                 return WithNode([](auto& m) {
                   AddNode(m, "Softmax", {"x"}, {"a"}, "sm")->add_attribute()->set_name("axis");
                 });
               },
               StatusCode::kInvalidArgument,
               "node 'sm' (Softmax, opset 17) attribute 'axis' has no type and no value"});
  c.push_back(
      {"bad_tensor_in_attribute",
       [] {
         return WithNode([](auto& m) {
           auto* n = AddNode(m, "ConstantOfShape", {"x"}, {"a"}, "cos");
           auto* a = n->add_attribute();
           a->set_name("value");
           a->set_type(onnx::AttributeProto::TENSOR);
           a->mutable_t()->set_data_type(55);
         });
       },
       StatusCode::kInvalidArgument,
       "node 'cos' (ConstantOfShape, opset 17) attribute 'value': unknown data type code 55"});
  // --- Constant nodes
  c.push_back({"constant_without_value",
               [] { return WithNode([](auto& m) { AddNode(m, "Constant", {}, {"k"}, "k0"); }); },
               StatusCode::kInvalidArgument,
               "node 'k0' (Constant, opset 17) must have exactly one of value, value_float"});
  c.push_back({"constant_with_two_values",
               [] {
                 return WithNode([](auto& m) {
                   auto* n = AddNode(m, "Constant", {}, {"k"}, "k2");
                   AttrInt(n, "value_int", 1);
                   AttrFloat(n, "value_float", 1);
                 });
               },
               StatusCode::kInvalidArgument,
               "node 'k2' (Constant, opset 17) must have exactly one"});
  c.push_back({"constant_sparse_value",
               [] {
                 return WithNode([](auto& m) {
                   auto* a = AddNode(m, "Constant", {}, {"k"}, "ks")->add_attribute();
                   a->set_name("sparse_value");
                   a->set_type(onnx::AttributeProto::SPARSE_TENSOR);
                 });
               },
               StatusCode::kUnimplemented,
               "node 'ks' (Constant, opset 17) attribute 'sparse_value': sparse and string "
               "constants are not supported"});
  c.push_back({"constant_value_strings",
               [] {
                 return WithNode([](auto& m) {
                   auto* a = AddNode(m, "Constant", {}, {"k"}, "kstr")->add_attribute();
                   a->set_name("value_strings");
                   a->set_type(onnx::AttributeProto::STRINGS);
                   a->add_strings("s");
                 });
               },
               StatusCode::kUnimplemented,
               "node 'kstr' (Constant, opset 17) attribute 'value_strings'"});
  c.push_back({"constant_value_float_wrong_type",
               [] {
                 return WithNode([](auto& m) {
                   AttrInt(AddNode(m, "Constant", {}, {"k"}, "kt"), "value_float", 3);
                 });
               },
               StatusCode::kInvalidArgument,
               "node 'kt' (Constant, opset 17) attribute 'value_float' is INT; the ONNX schema "
               "Constant-13 has FLOAT"});
  // Any default-domain attribute of another type than its ONNX schema's (kernels would
  // take it for absent and use the default: Transpose's reversal for a `perm` of floats).
  c.push_back({"transpose_perm_of_floats",
               [] {
                 return WithNode([](auto& m) {
                   AttrFloats(AddNode(m, "Transpose", {"x"}, {"t"}, "tr"), "perm", {1, 0});
                 });
               },
               StatusCode::kInvalidArgument,
               "node 'tr' (Transpose, opset 17) attribute 'perm' is FLOATS; the ONNX schema "
               "Transpose-13 has INTS"});
  c.push_back(
      {"constant_with_input",
       [] { return WithNode([](auto& m) { AddNode(m, "Constant", {"x"}, {"k"}, "kin"); }); },
       StatusCode::kInvalidArgument, "node 'kin' (Constant, opset 17) has 1 inputs; expected 0"});
  // --- canonicalization rules
  c.push_back(
      {"reduce_axes_attribute_at_opset_18",
       [] {
         return WithNode(
             [](auto& m) { AttrInts(AddNode(m, "ReduceMean", {"x"}, {"r"}, "rm"), "axes", {1}); },
             18);
       },
       StatusCode::kInvalidArgument,
       "node 'rm' (ReduceMean, opset 18): attribute 'axes' is not allowed from opset 18"});
  c.push_back({"reduce_axes_input_before_opset_18",
               [] {
                 return WithNode(
                     [](auto& m) {
                       AddInitI64(m, "ax", {1}, {1});
                       AddNode(m, "ReduceMax", {"x", "ax"}, {"r"}, "rmax");
                     },
                     13);
               },
               StatusCode::kInvalidArgument,
               "node 'rmax' (ReduceMax, opset 13) has 2 inputs; expected 1 (at opset 13 its "
               "other operands are attributes)"});
  c.push_back(
      {"reduce_axes_wrong_attribute_type",
       [] {
         return WithNode(
             [](auto& m) { AttrInt(AddNode(m, "ReduceMean", {"x"}, {"r"}, "rm"), "axes", 1); }, 13);
       },
       StatusCode::kInvalidArgument,
       "node 'rm' (ReduceMean, opset 13) attribute 'axes' is INT; the ONNX schema "
       "ReduceMean-13 has INTS"});
  c.push_back({"squeeze_axes_attribute",
               [] {
                 return WithNode([](auto& m) {
                   AttrInts(AddNode(m, "Squeeze", {"x"}, {"s"}, "sq"), "axes", {0});
                 });
               },
               StatusCode::kInvalidArgument,
               "node 'sq' (Squeeze, opset 17): attribute 'axes' is not allowed from opset 13 (it "
               "is input 1); this model is opset 17"});
  c.push_back({"clip_min_attribute",
               [] {
                 return WithNode(
                     [](auto& m) { AttrFloat(AddNode(m, "Clip", {"x"}, {"c"}, "clp"), "min", 0); });
               },
               StatusCode::kInvalidArgument,
               "node 'clp' (Clip, opset 17): attribute 'min' is not allowed from opset 11"});
  c.push_back({"topk_k_attribute",
               [] {
                 return WithNode([](auto& m) {
                   AddInitI64(m, "kk", {1}, {1});
                   AttrInt(AddNode(m, "TopK", {"x", "kk"}, {"v", "i"}, "topk"), "k", 1);
                 });
               },
               StatusCode::kInvalidArgument,
               "node 'topk' (TopK, opset 17): attribute 'k' is not allowed from opset 10"});
  c.push_back(
      {"split_num_outputs_before_opset_18",
       [] {
         return WithNode(
             [](auto& m) {
               AttrInt(AddNode(m, "Split", {"x"}, {"s1", "s2"}, "sp"), "num_outputs", 2);
             },
             13);
       },
       StatusCode::kInvalidArgument,
       "node 'sp' (Split, opset 13): attribute 'num_outputs' is only defined from opset 18"});
  c.push_back({"split_num_outputs_mismatch",
               [] {
                 return WithNode(
                     [](auto& m) {
                       AttrInt(AddNode(m, "Split", {"x"}, {"s1", "s2"}, "sp"), "num_outputs", 3);
                     },
                     18);
               },
               StatusCode::kInvalidArgument,
               "node 'sp' (Split, opset 18): attribute num_outputs=3 but the node has 2 outputs"});
  c.push_back(
      {"split_input_and_num_outputs",
       [] {
         return WithNode(
             [](auto& m) {
               AddInitI64(m, "sizes", {2}, {1, 1});
               AttrInt(AddNode(m, "Split", {"x", "sizes"}, {"s1", "s2"}, "sp"), "num_outputs", 2);
             },
             18);
       },
       StatusCode::kInvalidArgument,
       "node 'sp' (Split, opset 18): has both the 'split' input and the 'num_outputs'"});
  return c;
}

class ErrorCorpus : public ::testing::TestWithParam<Case> {};

TEST_P(ErrorCorpus, FailsWithItsOwnCodeAndMessage) {
  const Case& c = GetParam();
  auto g = ImportOnnxBytes(c.build(), "", c.options);
  ASSERT_FALSE(g.ok()) << c.name << " imported";
  EXPECT_EQ(g.status().code(), c.code) << g.status();
  EXPECT_NE(g.status().message().find(c.message), std::string::npos)
      << "expected substring: " << c.message << "\nactual: " << g.status();
}

INSTANTIATE_TEST_SUITE_P(Importer, ErrorCorpus, ::testing::ValuesIn(Corpus()),
                         [](const auto& info) { return info.param.name; });

TEST(ErrorCorpusMeta, AtLeastFortyDistinctCases) {
  std::set<std::string> names;
  for (const Case& c : Corpus()) names.insert(c.name);
  EXPECT_EQ(names.size(), Corpus().size());
  EXPECT_GE(names.size(), 40u);
}

// The Base model every case starts from imports cleanly: each failure above is due to
// the one thing the case breaks.
TEST(ErrorCorpusMeta, BaseModelImports) {
  auto g = ImportOnnxBytes(Serialize(Base()), "");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(ImportOnnxBytes(WithNode([](auto&) {}), "").ok());
}

}  // namespace
}  // namespace kiln
