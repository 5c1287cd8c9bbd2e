// aotipre's C++ harness: loads an AOTInductor package the way a C++ deployment does
// (torch::inductor::AOTIModelPackageLoader), runs it on sample inputs, writes the outputs.
//
// Built by aotipre's torch worker against the installed torch (headers and libraries of the
// wheel, rpath to its lib folder) and cached per torch version and compiler (worker step
// cpp_build; aotipre/cpp/harness.py plans the steps and reads the records). Usage:
//
//   aotipre_harness --package P [--model M] [--device-index I] --inputs IN [--outputs OUT]
//                   [--library SO]... [--mode run|loaders|runners] [--threads N]
//                   [--runners N] [--iterations K] [--serial-construct] [--stateful]
//
// IN is a torch.save of a list of tensors (the flat inputs, as AOTICompiledModel passes them
// to the loader); OUT is written with torch::pickle_save (a list of CPU tensors; Python reads
// it with torch.load(weights_only=True)). The last line on stdout is one JSON object after
// the marker "@@aotipre-cpp ". Before each phase a line "@@aotipre-cpp-phase NAME" goes to
// stderr (flushed), so a parent that sees the process die knows where.
//
// Exit status: 0 done and (concurrency modes) every output identical to the reference;
// 3 a C++ exception (in the JSON line); 4 outputs differ between threads or loaders;
// 2 bad usage. A crash is a signal; a hang is the parent's timeout to enforce.
//
// Modes:
//   run      one loader (num_runners 1), one run: what a simple C++ server does.
//   loaders  N threads construct N loaders at the same moment (a start barrier), each runs
//            once; all loaders stay alive until every thread is done (torch issue #194128:
//            concurrent construction corrupted the heap). --serial-construct: the threads
//            construct one at a time (a mutex around the constructor, the workaround a C++
//            server can apply), then run at the same moment.
//   runners  one loader with num_runners=R; a reference run, then N threads run K times each,
//            at the same moment, on the one loader.
//            --stateful (the model mutates buffers, so each call's outputs depend on the calls
//            before it): first a fresh loader (num_runners=R) is called 1 + N*K times in
//            sequence on one thread; then the outputs of the shared loader's reference run and
//            of the concurrent runs must be those of the sequence in some order, each call's
//            once (the runners of one loader share its buffers: equal state, any order).

#include <ATen/ATen.h>
#include <c10/core/Device.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr const char* kMarker = "@@aotipre-cpp ";
constexpr int kExitException = 3;
constexpr int kExitDiffer = 4;
constexpr int kExitUsage = 2;
constexpr int kProtocol = 1;

struct Options {
  std::string package;
  std::string model = "model";
  int device_index = -1;
  std::string inputs;
  std::string outputs;
  std::vector<std::string> libraries;
  std::string mode = "run";
  int threads = 4;
  int runners = 2;
  int iterations = 3;
  bool serial_construct = false;
  bool stateful = false;
};

std::string json_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string jstr(const std::string& text) {
  return "\"" + json_escape(text) + "\"";
}

void phase(const std::string& name) {
  std::fprintf(stderr, "@@aotipre-cpp-phase %s\n", name.c_str());
  std::fflush(stderr);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The error of a phase, as the JSON fields `error_phase` and `error`.
struct Failure {
  std::string phase;
  std::string type;
  std::string message;
  bool set() const { return !phase.empty(); }
  std::string json() const {
    if (!set()) return "\"error\":null";
    // keep the message bounded: a c10::Error carries a long backtrace
    std::string text = message.size() > 16000 ? message.substr(0, 16000) : message;
    return "\"error_phase\":" + jstr(phase) + ",\"error\":{\"type\":" + jstr(type) +
        ",\"message\":" + jstr(text) + "}";
  }
};

template <typename Fn>
bool guarded(const std::string& name, Failure& failure, Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const c10::Error& e) {
    failure = {name, "c10::Error", e.what_without_backtrace()};
  } catch (const std::exception& e) {
    failure = {name, "std::exception", e.what()};
  } catch (...) {
    failure = {name, "unknown", "a non-standard C++ exception"};
  }
  return false;
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<at::Tensor> read_inputs(const std::string& path) {
  c10::IValue value = torch::jit::pickle_load(read_file(path));
  std::vector<at::Tensor> out;
  if (value.isTensor()) {
    out.push_back(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorVector()) out.push_back(t);
  } else if (value.isList() || value.isTuple()) {
    std::vector<c10::IValue> items =
        value.isList() ? value.toListRef().vec() : value.toTupleRef().elements().vec();
    for (const c10::IValue& item : items) {
      if (!item.isTensor()) throw std::runtime_error("the inputs file holds a non-tensor item");
      out.push_back(item.toTensor());
    }
  } else {
    throw std::runtime_error("the inputs file holds neither a tensor nor a list of tensors");
  }
  return out;
}

void write_outputs(const std::string& path, const std::vector<at::Tensor>& outputs) {
  // a tuple, not a c10::List<Tensor>: the latter pickles as torch.jit._pickle.build_tensorlist,
  // which torch.load(weights_only=True) refuses
  std::vector<c10::IValue> items;
  for (const at::Tensor& t : outputs) items.emplace_back(t.detach().to(at::kCPU).contiguous());
  std::vector<char> data = torch::jit::pickle_save(c10::ivalue::Tuple::create(std::move(items)));
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename " + tmp);
}

std::vector<at::Tensor> on_device(const std::vector<at::Tensor>& inputs, const c10::Device& d) {
  std::vector<at::Tensor> out;
  out.reserve(inputs.size());
  for (const at::Tensor& t : inputs) out.push_back(t.to(d).clone());
  return out;
}

std::string describe(const std::vector<at::Tensor>& outputs) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < outputs.size(); ++i) {
    const at::Tensor& t = outputs[i];
    if (i) s << ",";
    s << "{\"dtype\":" << jstr(std::string(c10::toString(t.scalar_type())))
      << ",\"shape\":[";
    for (int64_t d = 0; d < t.dim(); ++d) s << (d ? "," : "") << t.size(d);
    s << "],\"device\":" << jstr(t.device().str()) << "}";
  }
  s << "]";
  return s.str();
}

// How `got` differs from `ref`: identical (bitwise equal), or the largest absolute difference.
struct Difference {
  bool identical = true;
  bool structure = false;
  double max_abs = 0.0;
  std::string json() const {
    std::ostringstream s;
    s << "\"identical\":" << (identical ? "true" : "false")
      << ",\"structure_differs\":" << (structure ? "true" : "false") << ",\"max_abs\":" << max_abs;
    return s.str();
  }
};

Difference difference(const std::vector<at::Tensor>& ref, const std::vector<at::Tensor>& got) {
  Difference d;
  if (ref.size() != got.size()) {
    d.identical = false;
    d.structure = true;
    return d;
  }
  for (size_t i = 0; i < ref.size(); ++i) {
    at::Tensor a = ref[i].detach().to(at::kCPU);
    at::Tensor b = got[i].detach().to(at::kCPU);
    if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) {
      d.identical = false;
      d.structure = true;
      continue;
    }
    if (at::equal(a, b)) continue;
    // NaN != NaN: equal() is false for NaN at the same place; count that as identical
    if (at::isFloatingType(a.scalar_type()) &&
        at::equal(at::isnan(a), at::isnan(b)) &&
        at::equal(at::nan_to_num(a, 0.0, 0.0, 0.0), at::nan_to_num(b, 0.0, 0.0, 0.0))) {
      continue;
    }
    d.identical = false;
    if (a.is_complex() || a.scalar_type() == at::kBool) {
      d.max_abs = std::max(d.max_abs, 1.0);
    } else {
      at::Tensor delta = (a.to(at::kDouble) - b.to(at::kDouble)).abs();
      delta = at::nan_to_num(delta, 0.0, 0.0, 0.0);
      d.max_abs = std::max(d.max_abs, delta.max().item<double>());
    }
  }
  return d;
}

// A one-shot start barrier: every thread waits until all have arrived.
class Barrier {
 public:
  explicit Barrier(int count) : left_(count) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (--left_ <= 0) {
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [this] { return left_ <= 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int left_;
};

// A stateful model's calls made one after another on one fresh loader (--stateful).
struct Sequence {
  std::vector<std::vector<at::Tensor>> calls;
  // for each call, the first call whose outputs are identical to its own
  std::vector<size_t> first_identical;
  bool empty() const { return calls.empty(); }
};

// Which call of `seq` returned `got`: the first identical one (its first_identical), or none
// (-1) with the smallest largest-absolute-difference to any call.
struct SequenceMatch {
  long index = -1;
  double max_abs = 0.0;
};

SequenceMatch match_sequence(const Sequence& seq, const std::vector<at::Tensor>& got) {
  SequenceMatch m;
  bool first = true;
  for (size_t j = 0; j < seq.calls.size(); ++j) {
    Difference d = difference(seq.calls[j], got);
    if (d.identical) {
      m.index = static_cast<long>(seq.first_identical[j]);
      m.max_abs = 0.0;
      return m;
    }
    double distance = d.structure ? 1.0 : d.max_abs;
    m.max_abs = first ? distance : std::min(m.max_abs, distance);
    first = false;
  }
  return m;
}

struct ThreadResult {
  double construct_s = 0.0;
  double run_s = 0.0;
  Failure failure;
  std::vector<at::Tensor> outputs;
  Difference diff;
  std::vector<long> sequence_matches;  // --stateful: match_sequence's index of each run
};

std::string threads_json(const std::vector<ThreadResult>& results) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < results.size(); ++i) {
    const ThreadResult& r = results[i];
    s << (i ? "," : "") << "{\"thread\":" << i << ",\"construct_s\":" << r.construct_s
      << ",\"run_s\":" << r.run_s << "," << r.failure.json() << "," << r.diff.json() << "}";
  }
  s << "]";
  return s.str();
}

c10::Device package_device(torch::inductor::AOTIModelPackageLoader& loader, int index) {
  auto meta = loader.get_metadata();
  auto it = meta.find("AOTI_DEVICE_KEY");
  std::string kind = it == meta.end() ? "cpu" : it->second;
  if (kind == "cpu") return c10::Device(c10::kCPU);
  return c10::Device(kind + ":" + std::to_string(index < 0 ? 0 : index));
}

int parse_args(int argc, char** argv, Options& o, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    try {
      if (arg == "--package") o.package = value();
      else if (arg == "--model") o.model = value();
      else if (arg == "--device-index") o.device_index = std::stoi(value());
      else if (arg == "--inputs") o.inputs = value();
      else if (arg == "--outputs") o.outputs = value();
      else if (arg == "--library") o.libraries.push_back(value());
      else if (arg == "--mode") o.mode = value();
      else if (arg == "--threads") o.threads = std::stoi(value());
      else if (arg == "--runners") o.runners = std::stoi(value());
      else if (arg == "--iterations") o.iterations = std::stoi(value());
      else if (arg == "--serial-construct") o.serial_construct = true;
      else if (arg == "--stateful") o.stateful = true;
      else throw std::invalid_argument("unknown argument " + arg);
    } catch (const std::exception& e) {
      error = e.what();
      return kExitUsage;
    }
  }
  if (o.package.empty() || o.inputs.empty()) error = "--package and --inputs are required";
  else if (o.mode != "run" && o.mode != "loaders" && o.mode != "runners") error = "bad --mode";
  else if (o.threads < 1 || o.runners < 1 || o.iterations < 1) error = "counts must be >= 1";
  return error.empty() ? 0 : kExitUsage;
}

int finish(const std::string& body, int status) {
  std::cout << kMarker << "{\"protocol\":" << kProtocol << "," << body << "}" << std::endl;
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string usage;
  if (parse_args(argc, argv, o, usage) != 0) {
    return finish("\"mode\":null,\"ok\":false,\"usage\":" + jstr(usage), kExitUsage);
  }
  std::ostringstream head;
  head << "\"mode\":" << jstr(o.mode) << ",\"model\":" << jstr(o.model)
       << ",\"device_index\":" << o.device_index;
  Failure failure;

  phase("load_library");
  for (const std::string& lib : o.libraries) {
    if (dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      const char* why = dlerror();
      failure = {"load_library", "dlopen", std::string(why ? why : lib)};
      return finish(head.str() + ",\"ok\":false," + failure.json(), kExitException);
    }
  }

  phase("read_inputs");
  std::vector<at::Tensor> inputs;
  if (!guarded("read_inputs", failure, [&] { inputs = read_inputs(o.inputs); })) {
    return finish(head.str() + ",\"ok\":false," + failure.json(), kExitException);
  }

  if (o.mode == "run") {
    phase("construct");
    auto start = std::chrono::steady_clock::now();
    std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader;
    bool ok = guarded("construct", failure, [&] {
      loader = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
          o.package, o.model, false, 1, static_cast<c10::DeviceIndex>(o.device_index));
    });
    double construct_s = seconds_since(start);
    std::vector<at::Tensor> outputs;
    double run_s = 0.0;
    if (ok) {
      phase("run");
      start = std::chrono::steady_clock::now();
      ok = guarded("run", failure, [&] {
        outputs = loader->run(on_device(inputs, package_device(*loader, o.device_index)));
        for (at::Tensor& t : outputs) t = t.detach();
        if (!outputs.empty()) outputs[0].to(at::kCPU);  // waits for a CUDA stream
      });
      run_s = seconds_since(start);
    }
    if (ok && !o.outputs.empty()) {
      phase("write_outputs");
      ok = guarded("write_outputs", failure, [&] { write_outputs(o.outputs, outputs); });
    }
    std::ostringstream body;
    body << head.str() << ",\"ok\":" << (ok ? "true" : "false") << ",\"construct_s\":"
         << construct_s << ",\"run_s\":" << run_s << ",\"outputs\":" << describe(outputs) << ","
         << failure.json();
    phase("done");
    return finish(body.str(), ok ? 0 : kExitException);
  }

  // Concurrency modes.
  std::vector<ThreadResult> results(static_cast<size_t>(o.threads));
  std::vector<at::Tensor> reference;
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> shared;
  double reference_s = 0.0;
  const bool stateful = o.stateful && o.mode == "runners";
  Sequence sequence;
  long reference_match = -1;
  if (stateful) {
    phase("sequential_run");
    size_t calls = 1 + static_cast<size_t>(o.threads) * static_cast<size_t>(o.iterations);
    bool ok = guarded("sequential_run", failure, [&] {
      torch::inductor::AOTIModelPackageLoader fresh(
          o.package, o.model, false, static_cast<size_t>(o.runners),
          static_cast<c10::DeviceIndex>(o.device_index));
      for (size_t i = 0; i < calls; ++i) {
        std::vector<at::Tensor> out =
            fresh.run(on_device(inputs, package_device(fresh, o.device_index)));
        for (at::Tensor& t : out) t = t.detach().to(at::kCPU);
        size_t same = i;
        for (size_t j = 0; j < i && same == i; ++j) {
          if (difference(sequence.calls[j], out).identical) same = sequence.first_identical[j];
        }
        sequence.calls.push_back(std::move(out));
        sequence.first_identical.push_back(same);
      }
    });
    if (!ok) return finish(head.str() + ",\"ok\":false," + failure.json(), kExitException);
  }
  if (o.mode == "runners") {
    phase("construct");
    bool ok = guarded("construct", failure, [&] {
      shared = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
          o.package, o.model, false, static_cast<size_t>(o.runners),
          static_cast<c10::DeviceIndex>(o.device_index));
    });
    if (ok) {
      phase("reference_run");
      auto start = std::chrono::steady_clock::now();
      ok = guarded("reference_run", failure, [&] {
        reference = shared->run(on_device(inputs, package_device(*shared, o.device_index)));
        for (at::Tensor& t : reference) t = t.detach().to(at::kCPU);
      });
      reference_s = seconds_since(start);
      if (ok && stateful) reference_match = match_sequence(sequence, reference).index;
    }
    if (!ok) return finish(head.str() + ",\"ok\":false," + failure.json(), kExitException);
  }

  phase(o.mode == "loaders" ? "concurrent_construct" : "concurrent_run");
  std::vector<std::unique_ptr<torch::inductor::AOTIModelPackageLoader>> loaders(results.size());
  Barrier barrier(o.threads);
  std::mutex construct_mutex;  // taken around construction only with --serial-construct
  std::vector<std::thread> pool;
  for (size_t i = 0; i < results.size(); ++i) {
    pool.emplace_back([&, i] {
      ThreadResult& r = results[i];
      barrier.arrive_and_wait();
      torch::inductor::AOTIModelPackageLoader* loader = shared.get();
      if (loader == nullptr) {
        auto start = std::chrono::steady_clock::now();
        if (!guarded("construct", r.failure, [&] {
              std::unique_lock<std::mutex> serial(construct_mutex, std::defer_lock);
              if (o.serial_construct) serial.lock();
              loaders[i] = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
                  o.package, o.model, false, 1, static_cast<c10::DeviceIndex>(o.device_index));
            })) {
          return;
        }
        r.construct_s = seconds_since(start);
        loader = loaders[i].get();
      }
      auto start = std::chrono::steady_clock::now();
      int rounds = shared ? o.iterations : 1;
      for (int k = 0; k < rounds && !r.failure.set(); ++k) {
        guarded("run", r.failure, [&] {
          std::vector<at::Tensor> out =
              loader->run(on_device(inputs, package_device(*loader, o.device_index)));
          for (at::Tensor& t : out) t = t.detach().to(at::kCPU);
          if (stateful) {  // a call of the sequence, in some order: which one
            SequenceMatch m = match_sequence(sequence, out);
            r.sequence_matches.push_back(m.index);
            r.diff.identical = r.diff.identical && m.index >= 0;
            r.diff.max_abs = std::max(r.diff.max_abs, m.max_abs);
            if (k == 0) r.outputs = out;
          } else if (k == 0) {
            r.outputs = out;
          } else {
            Difference d = difference(r.outputs, out);  // a later run of the same thread
            r.diff.identical = r.diff.identical && d.identical;
            r.diff.max_abs = std::max(r.diff.max_abs, d.max_abs);
          }
        });
      }
      r.run_s = seconds_since(start);
    });
  }
  for (std::thread& t : pool) t.join();

  phase("compare");
  bool all_ok = true;
  bool all_identical = true;
  // --stateful: how often each call of the sequence was returned (by its first_identical),
  // how many outputs no call returned, and how many repeat a call more often than the
  // sequence holds it (two calls that read the same state)
  std::vector<size_t> returned(sequence.calls.size(), 0);
  size_t unmatched = 0;
  size_t repeated = 0;
  if (stateful) {
    std::vector<long> matches{reference_match};
    for (const ThreadResult& r : results) {
      matches.insert(matches.end(), r.sequence_matches.begin(), r.sequence_matches.end());
    }
    for (long m : matches) {
      if (m < 0) ++unmatched;
      else ++returned[static_cast<size_t>(m)];
    }
    std::vector<size_t> held(sequence.calls.size(), 0);
    for (size_t f : sequence.first_identical) ++held[f];
    for (size_t j = 0; j < returned.size(); ++j) {
      if (returned[j] > held[j]) repeated += returned[j] - held[j];
    }
    all_identical = unmatched == 0 && repeated == 0;
  }
  for (ThreadResult& r : results) {
    if (r.failure.set()) {
      all_ok = false;
      if (!failure.set()) failure = r.failure;
      continue;
    }
    if (stateful) continue;  // judged against the sequence above
    if (reference.empty()) reference = r.outputs;  // loaders: the first loader that ran
    bool repeat_identical = r.diff.identical;
    double repeat_max_abs = r.diff.max_abs;
    r.diff = difference(reference, r.outputs);
    r.diff.identical = r.diff.identical && repeat_identical;
    r.diff.max_abs = std::max(r.diff.max_abs, repeat_max_abs);
    all_identical = all_identical && r.diff.identical;
  }
  if (all_ok && !o.outputs.empty()) {
    phase("write_outputs");
    all_ok = guarded("write_outputs", failure, [&] { write_outputs(o.outputs, reference); });
  }
  std::ostringstream body;
  body << head.str() << ",\"ok\":" << (all_ok && all_identical ? "true" : "false")
       << ",\"threads\":" << o.threads << ",\"runners\":" << (shared ? o.runners : 1)
       << ",\"iterations\":" << (shared ? o.iterations : 1)
       << ",\"serial_construct\":" << (o.serial_construct ? "true" : "false")
       << ",\"reference_s\":" << reference_s << ",\"stateful\":" << (stateful ? "true" : "false")
       << ",\"sequence_calls\":" << sequence.calls.size() << ",\"unmatched\":" << unmatched
       << ",\"repeated\":" << repeated
       << ",\"identical\":" << (all_identical ? "true" : "false")
       << ",\"outputs\":" << describe(reference) << ",\"per_thread\":" << threads_json(results)
       << "," << failure.json();
  phase("done");
  int status = !all_ok ? kExitException : (all_identical ? 0 : kExitDiffer);
  return finish(body.str(), status);
}
