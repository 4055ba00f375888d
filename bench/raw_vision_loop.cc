// raw_vision_loop: the peer of P8 (vision) — what one process does with OpenCV alone, no server:
// `batch` copies of an encoded image decoded (cv::imdecode), made into one blob
// (cv::dnn::blobFromImages: resize to the network's size, x scale, BGR→RGB) and run through the
// ONNX network (cv::dnn::Net::forward), in a loop for a fixed time. Prints one JSON line with
// images/s and the share of the time that went to decoding and the blob.
//
//   raw_vision_loop --model classifier-tiny.onnx --image photo.jpg --batch 16 --size 32
//                   --scale 0.00392156862745098 --seconds 10
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/dnn.hpp>
#include <opencv2/imgcodecs.hpp>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

int main(int argc, char** argv) {
  CLI::App app{"raw OpenCV decode + blobFromImages + forward loop"};
  std::string model_path, image_path;
  int batch = 16, size = 32;
  double scale = 1.0 / 255, seconds = 10, warmup = 2;
  app.add_option("--model", model_path)->required();
  app.add_option("--image", image_path)->required();
  app.add_option("--batch", batch);
  app.add_option("--size", size, "the network's input width and height");
  app.add_option("--scale", scale);
  app.add_option("--seconds", seconds);
  app.add_option("--warmup", warmup);
  CLI11_PARSE(app, argc, argv);

  cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
  std::stringstream file;
  file << std::ifstream(image_path, std::ios::binary).rdbuf();
  const std::string bytes = file.str();
  const cv::Mat encoded(1, static_cast<int>(bytes.size()), CV_8U, const_cast<char*>(bytes.data()));
  cv::dnn::Net net = cv::dnn::readNetFromONNX(model_path);
  net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
  net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);

  using Clock = std::chrono::steady_clock;
  int64_t images = 0;
  double pre_seconds = 0, total_seconds = 0;
  const auto start = Clock::now();
  bool measuring = false;
  std::vector<cv::Mat> decoded(static_cast<size_t>(batch));
  while (true) {
    const auto t0 = Clock::now();
    const double elapsed = std::chrono::duration<double>(t0 - start).count();
    if (!measuring && elapsed >= warmup) measuring = true;
    if (elapsed >= warmup + seconds) break;
    for (auto& img : decoded) img = cv::imdecode(encoded, cv::IMREAD_COLOR);
    const cv::Mat blob = cv::dnn::blobFromImages(decoded, scale, cv::Size(size, size),
                                                 cv::Scalar(), /*swapRB=*/true, /*crop=*/false);
    const auto t1 = Clock::now();
    net.setInput(blob);
    const cv::Mat out = net.forward();
    const auto t2 = Clock::now();
    if (out.size[0] != batch) return 1;
    if (measuring) {
      images += batch;
      pre_seconds += std::chrono::duration<double>(t1 - t0).count();
      total_seconds += std::chrono::duration<double>(t2 - t0).count();
    }
  }
  std::cout << nlohmann::json{{"ips", static_cast<double>(images) / total_seconds},
                              {"images", images},
                              {"pre_share", pre_seconds / total_seconds},
                              {"ms_per_image", 1000 * total_seconds / static_cast<double>(images)}}
                   .dump()
            << "\n";
  return 0;
}
